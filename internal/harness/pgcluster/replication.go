package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Streaming replication, for failover tests: a primary started with Start,
// a standby cloned from it with StartStandby, Promote to make the standby
// the primary, and Follow to bring a crashed old primary back as a standby
// of the new one. The standby connects to its primary over TCP on
// 127.0.0.1 as the user postgres; initdb's trust rules already allow
// replication connections from there.
//
// Synchronous replication is a setting of the primary: start it with
// Settings "synchronous_standby_names=<name>" (the standby's name) and every
// commit waits until the standby has flushed it. Follow (pg_rewind) needs
// "wal_log_hints=on" on the cluster it rewinds, from its first start, WAL
// kept back to the last checkpoint before the two diverged
// ("wal_keep_size=1GB" is plenty for a test), and "full_page_writes=on" on
// both (a Fast cluster turns it off: set it back in Settings).

// StartStandby clones primary into opts.Dir with pg_basebackup (the
// directory must be missing or empty) and starts it as a streaming standby
// that names itself name (its application_name on the primary, the name
// synchronous_standby_names refers to). It returns once the standby accepts
// (read-only) connections.
func StartStandby(ctx context.Context, primary *Cluster, name string, opts Options) (*Cluster, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	if err := c.makeDir(); err != nil {
		return nil, err
	}
	if entries, err := os.ReadDir(c.dir); err != nil || len(entries) > 0 {
		return nil, fmt.Errorf("pgcluster: standby data dir %s must be empty (err: %v)", c.dir, err)
	}
	tool, err := c.tool("pg_basebackup")
	if err != nil {
		return nil, err
	}
	c.log.Info("cloning primary for a standby", "primary_port", primary.port, "dir", c.dir, "name", name)
	// -R writes standby.signal and primary_conninfo (this connection string,
	// so the standby's application_name is name); -c fast: no wait for a
	// scheduled checkpoint.
	args := []string{"-D", c.dir, "-d", primary.conninfo(name), "-R", "-X", "stream", "-c", "fast"}
	if c.fast {
		args = append(args, "--no-sync")
	}
	if err := c.runTool(ctx, tool, args...); err != nil {
		return nil, err
	}
	if err := c.startPicking(ctx, opts.Port == 0); err != nil {
		return nil, err
	}
	return c, nil
}

// Promote makes a standby the primary (pg_promote) and returns once it
// accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: promote %s: %w", c.dir, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var done bool
	if err := conn.QueryRow(ctx, `SELECT pg_promote(true, 60)`).Scan(&done); err != nil {
		return fmt.Errorf("pgcluster: promote %s: %w", c.dir, err)
	}
	if !done {
		return fmt.Errorf("pgcluster: promote %s: not promoted within 60s", c.dir)
	}
	// pg_control names the new timeline only after a checkpoint; until then
	// pg_rewind (Follow) takes the two for the same timeline.
	if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
		return fmt.Errorf("pgcluster: checkpoint after promote %s: %w", c.dir, err)
	}
	c.log.Info("postgres promoted", "port", c.port, "dir", c.dir)
	return nil
}

// InRecovery reports whether the server is a standby (pg_is_in_recovery).
func (c *Cluster) InRecovery(ctx context.Context) (bool, error) {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var rec bool
	err = conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&rec)
	return rec, err
}

// Follow brings a stopped or killed cluster back as a streaming standby of
// primary under name: pg_rewind takes back what it wrote after the two
// diverged (it runs crash recovery first after a Kill), then it starts in
// standby mode. Both must run with full_page_writes=on, and c must have run
// with wal_log_hints=on.
func (c *Cluster) Follow(ctx context.Context, primary *Cluster, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	c.mu.Lock()
	running := c.proc != nil && !c.proc.exited()
	c.mu.Unlock()
	if running {
		return fmt.Errorf("pgcluster: follow: %s is running; stop or kill it first", c.dir)
	}
	if err := c.clearStalePID(ctx); err != nil {
		return err
	}
	tool, err := c.tool("pg_rewind")
	if err != nil {
		return err
	}
	// After a Kill, pg_rewind first runs crash recovery in single-user mode,
	// which reads the settings from the data directory, not our command
	// line: without these there, recovery records wal_log_hints off and
	// pg_rewind refuses the directory.
	if err := c.appendAutoConf("wal_log_hints = on", "full_page_writes = on", "wal_keep_size = '1GB'"); err != nil {
		return err
	}
	c.log.Info("rewinding to follow a new primary", "dir", c.dir, "primary_port", primary.port, "name", name)
	// -R writes standby.signal and primary_conninfo, from --source-server.
	if err := c.runTool(ctx, tool, "--target-pgdata", c.dir, "--source-server", primary.conninfo(name), "-R"); err != nil {
		return err
	}
	return c.Start(ctx)
}

// Pause stops the server and all its processes with SIGSTOP, as a hung host
// would: connections stay open, nothing answers, a standby receives no WAL.
// Resume continues them. For replication-lag faults.
func (c *Cluster) Pause() error { return c.signalGroup(sigStop) }

// Resume continues a paused server.
func (c *Cluster) Resume() error { return c.signalGroup(sigCont) }

func (c *Cluster) signalGroup(sig groupSignal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return errors.New("pgcluster: not running")
	}
	return signalGroup(c.proc.pid, sig)
}

// MultiHostURL is a libpq multi-host URL over clusters for database, with
// target_session_attrs=read-write: a client tries the hosts in order and
// keeps the one that accepts writes, so it finds the primary after a
// failover without being told.
func MultiHostURL(database string, clusters ...*Cluster) string {
	hosts := make([]string, len(clusters))
	for i, c := range clusters {
		hosts[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port))
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     strings.Join(hosts, ","),
		Path:     "/" + database,
		RawQuery: "sslmode=disable&target_session_attrs=read-write",
	}
	return u.String()
}

// appendAutoConf appends lines to the data directory's postgresql.auto.conf.
func (c *Cluster) appendAutoConf(lines ...string) error {
	path := filepath.Join(c.dir, "postgresql.auto.conf")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	_, err = f.WriteString(strings.Join(lines, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && c.owner != nil {
		err = os.Chown(path, c.owner.uid, c.owner.gid)
	}
	if err != nil {
		return fmt.Errorf("pgcluster: %s: %w", path, err)
	}
	return nil
}

// conninfo is the keyword/value connection string a standby uses to reach c.
func (c *Cluster) conninfo(name string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres application_name=%s", c.port, name)
}

// tool finds one of the server's other programs beside postgres.
func (c *Cluster) tool(name string) (string, error) {
	dirs := []string{filepath.Dir(c.bins.postgres)}
	if real, err := filepath.EvalSymlinks(c.bins.postgres); err == nil {
		dirs = append(dirs, filepath.Dir(real)) // PATH may hold symlinks to Debian's versioned directory
	}
	for _, d := range dirs {
		if p := filepath.Join(d, name); isExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("pgcluster: %s not found beside %s or on PATH: %w", name, c.bins.postgres, fs.ErrNotExist)
}

// checkName accepts the names synchronous_standby_names can list unquoted.
func checkName(name string) error {
	if name == "" {
		return errors.New("pgcluster: standby name required")
	}
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return fmt.Errorf("pgcluster: standby name %q: use lower-case letters, digits and _", name)
		}
	}
	return nil
}

// groupSignal is what Pause and Resume send to the server's process group.
type groupSignal int

const (
	sigStop groupSignal = iota
	sigCont
)
