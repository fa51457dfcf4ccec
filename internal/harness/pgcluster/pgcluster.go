package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries means initdb or postgres could not be found.
var ErrNoBinaries = errors.New("pgcluster: PostgreSQL server binaries not found: " +
	"set DATABASE_URL to use an existing server, or install the PostgreSQL server binaries " +
	"(initdb, pg_ctl, postgres) on PATH (Debian: apt-get install postgresql, " +
	"and add /usr/lib/postgresql/15/bin to PATH)")

// ErrPortInUse marks a start that failed because another process holds the
// port; Start then retries with another free port when it picked the port.
var ErrPortInUse = errors.New("port already in use")

// LogFile is the name of the server log inside the data directory.
const LogFile = "postgres.log"

// Options configures a private cluster.
type Options struct {
	// Dir is the data directory. It is created when missing (its missing
	// parents with mode 0755, so that the postgres OS user can reach it), and
	// initdb runs when it holds no cluster yet (no PG_VERSION file). Required.
	Dir string
	// Port is the TCP port on 127.0.0.1. Defaults to 0: a free port is picked
	// on the first start, and later Starts of the same Cluster reuse it.
	Port int
	// Fast turns off fsync and full_page_writes and runs initdb without
	// syncing. For tests only: an OS crash can corrupt a Fast cluster, but a
	// postgres crash (Kill) loses no acknowledged commit. Defaults to false.
	Fast bool
	// Settings are extra server settings ("name=value"), passed as -c after
	// the cluster's own (so they win).
	Settings []string
	// Logger receives start and stop events. Defaults to discarding them.
	Logger *slog.Logger
}

// Cluster is a private PostgreSQL server owned by this process.
type Cluster struct {
	dir   string
	port  int
	fast  bool
	extra []string
	log   *slog.Logger
	bins  binaries
	owner *osUser // the OS user postgres runs as when we are root; nil otherwise

	mu   sync.Mutex // serialises Start, Stop and Kill
	proc *process   // nil while stopped
}

type binaries struct{ initdb, postgres string }

// Start prepares the data directory (initdb on first use) and starts the
// server; it returns once the server accepts connections. ctx bounds initdb
// and the wait for readiness; the server outlives ctx until Stop or Kill.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	if err := c.prepareDir(ctx); err != nil {
		return nil, err
	}
	if err := c.startPicking(ctx, opts.Port == 0); err != nil {
		return nil, err
	}
	return c, nil
}

// newCluster checks opts and finds the binaries; nothing is started.
func newCluster(opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("pgcluster: Options.Dir is required")
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("pgcluster: Options.Port %d out of range", opts.Port)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: data dir %q: %w", opts.Dir, err)
	}
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	owner, err := lookupOwner()
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cluster{dir: dir, port: opts.Port, fast: opts.Fast, extra: opts.Settings, log: log, bins: bins, owner: owner}, nil
}

// startPicking starts the server for the first time. A picked port can be
// taken by someone else before postgres binds it; picking again is the only
// cure for that race.
func (c *Cluster) startPicking(ctx context.Context, pick bool) error {
	const attempts = 3
	for attempt := 1; ; attempt++ {
		if pick {
			var err error
			if c.port, err = freePort(); err != nil {
				return err
			}
		}
		err := c.Start(ctx)
		if err == nil {
			return nil
		}
		if !pick || !errors.Is(err, ErrPortInUse) || attempt == attempts {
			return err
		}
		c.log.Debug("postgres port taken, picking another", "port", c.port)
	}
}

// URL is the connection URL of database on this cluster, as user postgres.
func (c *Cluster) URL(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port is the TCP port the cluster listens on (127.0.0.1 only).
func (c *Cluster) Port() int { return c.port }

// Dir is the data directory; the server log is LogFile inside it.
func (c *Cluster) Dir() string { return c.dir }

// PID is the postmaster's process id, 0 while the cluster is stopped.
// Every other postgres process (backends, auxiliary processes) is its
// child.
func (c *Cluster) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return 0
	}
	return c.proc.pid
}

// Start starts the server again after Stop or Kill, on the same port and data
// directory, and waits until it accepts connections. After Kill, postgres
// runs crash recovery first. Start on a running cluster does nothing.
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.proc; p != nil {
		if !p.exited() {
			return nil
		}
		// postgres died on its own (crash, OOM killer): start a new one.
		c.log.Warn("postgres had exited", "pid", p.pid, "err", p.waitErr)
		p.release()
		c.proc = nil
	}
	if err := c.clearStalePID(ctx); err != nil {
		return err
	}

	// After a Kill, a backend that is still on its way out keeps the old
	// shared memory segment attached for a moment, and postgres refuses to
	// start ("pre-existing shared memory block … is still in use"). That
	// clears by itself: try again for a while, then report.
	var p *process
	deadline := time.Now().Add(15 * time.Second)
	for {
		var tail string
		var err error
		p, tail, err = c.startOnce(ctx)
		if err == nil {
			break
		}
		if !strings.Contains(tail, "pre-existing shared memory block") || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		c.log.Info("postgres start refused: old shared memory still attached; retrying")
		time.Sleep(200 * time.Millisecond)
		if err := c.clearStalePID(ctx); err != nil {
			return err
		}
	}
	c.proc = p
	c.log.Info("postgres started", "port", c.port, "dir", c.dir, "pid", p.pid)
	return nil
}

// startOnce starts postgres and waits for it; on failure it returns the
// tail of this run's server log too.
func (c *Cluster) startOnce(ctx context.Context) (*process, string, error) {
	logPath := filepath.Join(c.dir, LogFile)
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("pgcluster: open server log: %w", err)
	}
	if c.owner != nil {
		if err := logFile.Chown(c.owner.uid, c.owner.gid); err != nil {
			logFile.Close()
			return nil, "", fmt.Errorf("pgcluster: chown server log: %w", err)
		}
	}
	// Only this run's part of the log belongs in a start error.
	var logStart int64
	if fi, err := logFile.Stat(); err == nil {
		logStart = fi.Size()
	}

	cmd := exec.Command(c.bins.postgres, c.serverArgs()...)
	cmd.Dir = "/" // the postgres user may not be allowed into our working directory
	cmd.Env = serverEnv()
	cmd.Stdout = logFile // an *os.File is inherited directly: no copying goroutine
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr(c.owner, true)
	p, err := startProcess(cmd)
	if err != nil {
		logFile.Close()
		return nil, "", fmt.Errorf("pgcluster: start %s: %w", c.bins.postgres, err)
	}
	p.logFile = logFile

	if err := c.waitReady(ctx, p); err != nil {
		_ = p.kill() // best effort (and closes the log): the start error is what the caller needs
		tail := logTail(logPath, logStart)
		if strings.Contains(tail, "Address already in use") {
			err = fmt.Errorf("%w: %w", ErrPortInUse, err)
		}
		return nil, tail, fmt.Errorf("pgcluster: postgres on 127.0.0.1:%d (data dir %s): %w\n--- tail of %s ---\n%s",
			c.port, c.dir, err, logPath, tail)
	}
	return p, "", nil
}

// Stop shuts the server down in postgres' "fast" mode (open transactions are
// rolled back, clients disconnected, a checkpoint written) and waits until it
// has exited. If ctx ends first the server is killed and Stop reports it.
// Stop on a stopped cluster does nothing.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.proc
	if p == nil {
		return nil
	}
	c.proc = nil
	if err := p.shutdown(ctx); err != nil {
		return fmt.Errorf("pgcluster: stop postgres (pid %d, data dir %s): %w", p.pid, c.dir, err)
	}
	c.log.Info("postgres stopped", "port", c.port, "dir", c.dir)
	return nil
}

// Kill crashes the server: SIGKILL to the postmaster and all its backends at
// once, no checkpoint, postmaster.pid left behind. The next Start runs crash
// recovery. Kill on a stopped cluster does nothing.
func (c *Cluster) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.proc
	if p == nil {
		return nil
	}
	c.proc = nil
	if err := p.kill(); err != nil {
		return fmt.Errorf("pgcluster: kill postgres (pid %d): %w", p.pid, err)
	}
	c.log.Info("postgres killed", "port", c.port, "dir", c.dir)
	return nil
}

// serverArgs configures the server on the command line rather than in
// postgresql.conf, so every start gets the same settings whatever is in the
// data directory.
func (c *Cluster) serverArgs() []string {
	settings := []string{
		"listen_addresses=127.0.0.1",
		"port=" + strconv.Itoa(c.port),
		// No unix socket: /var/run/postgresql may not exist or be writable,
		// and a socket path inside a deep temp dir can exceed the 107-byte limit.
		"unix_socket_directories=",
		// Tests open pools from many parallel tests against one cluster.
		"max_connections=200",
		// Keep log messages in English whatever the environment, so a start
		// error's log tail is readable and port conflicts are recognisable.
		"lc_messages=C",
	}
	if c.fast {
		// Only what an OS crash needs is turned off. synchronous_commit stays
		// on: with it off a commit is acknowledged before its WAL leaves
		// postgres' shared memory, so Kill would lose acknowledged commits
		// and fault-injection tests would report losses Intake did not
		// cause. With fsync off it costs one write() per commit.
		settings = append(settings,
			"fsync=off",
			"full_page_writes=off",
			// Many test clusters may run at once; they need little cache.
			"shared_buffers=32MB",
		)
	}
	settings = append(settings, c.extra...)
	args := []string{"-D", c.dir}
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	return args
}

// prepareDir creates the data directory, hands it to the postgres OS user
// when we are root, and runs initdb when it holds no cluster yet.
func (c *Cluster) prepareDir(ctx context.Context) error {
	if err := c.makeDir(); err != nil {
		return err
	}
	switch _, err := os.Stat(filepath.Join(c.dir, "PG_VERSION")); {
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("pgcluster: data dir: %w", err)
	}

	args := []string{"-D", c.dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"}
	if c.fast {
		args = append(args, "--no-sync")
	}
	c.log.Info("initialising postgres data dir", "dir", c.dir)
	return c.runTool(ctx, c.bins.initdb, args...)
}

// runTool runs one of the server's command-line tools (initdb,
// pg_basebackup, pg_rewind) as the postgres OS user when we are root.
func (c *Cluster) runTool(ctx context.Context, path string, args ...string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = "/"
	cmd.Env = serverEnv()
	cmd.SysProcAttr = sysProcAttr(c.owner, false)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgcluster: %s %s: %w\n%s", filepath.Base(path), c.dir, err, lastLines(out, 30))
	}
	c.log.Debug("tool ran", "tool", filepath.Base(path), "output", lastLines(out, 30))
	return nil
}

// makeDir creates the data directory (mode 0700, as postgres demands) and
// hands it to the postgres OS user when we are root.
func (c *Cluster) makeDir() error {
	if err := os.MkdirAll(filepath.Dir(c.dir), 0o755); err != nil {
		return fmt.Errorf("pgcluster: create parent of data dir: %w", err)
	}
	if err := os.Mkdir(c.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("pgcluster: create data dir: %w", err)
	}
	if c.owner != nil {
		if err := c.owner.checkReach(filepath.Dir(c.dir)); err != nil {
			return fmt.Errorf("pgcluster: data dir %s: %w", c.dir, err)
		}
		if err := c.owner.chownTree(c.dir); err != nil {
			return fmt.Errorf("pgcluster: hand data dir to OS user %s: %w", c.owner.name, err)
		}
	}
	// postgres refuses a data directory that others can read.
	if err := os.Chmod(c.dir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: data dir: %w", err)
	}
	return nil
}

// waitReady returns once postgres reports "ready" in postmaster.pid and a
// connection succeeds. Waiting for the pid file first keeps the log free of
// "the database system is starting up" noise.
func (c *Cluster) waitReady(ctx context.Context, p *process) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		if c.pidFileReady(p.pid) {
			if lastErr = c.ping(ctx); lastErr == nil {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("postgres exited before it was ready: %v", p.waitErr)
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("waiting for postgres to accept connections: %w (last attempt: %v)", ctx.Err(), lastErr)
			}
			return fmt.Errorf("waiting for postgres to accept connections: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

func (c *Cluster) ping(ctx context.Context) error { return ping(ctx, c.URL("postgres")) }

// ping connects to url and closes the connection, within 2s.
func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// pidFileReady reports whether postmaster.pid names pid and, on its eighth
// line, the status "ready" (what pg_ctl -w waits for).
func (c *Cluster) pidFileReady(pid int) bool {
	b, err := os.ReadFile(filepath.Join(c.dir, "postmaster.pid"))
	if err != nil {
		return false
	}
	lines := strings.Split(string(b), "\n")
	return len(lines) >= 8 && lines[0] == strconv.Itoa(pid) && strings.TrimSpace(lines[7]) == "ready"
}

// clearStalePID deals with a postmaster.pid left behind by a server that did
// not shut down cleanly. postgres itself takes over a lock file whose process
// is gone, but refuses one whose pid now belongs to another live process
// (pid reuse, common in containers), so that case is removed here. A live
// postmaster of this data directory (for example one still shutting down
// after its previous owner died) is waited for.
func (c *Cluster) clearStalePID(ctx context.Context) error {
	path := filepath.Join(c.dir, "postmaster.pid")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgcluster: read %s: %w", path, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return nil // postgres reports a malformed lock file itself
	}
	const patience = 15 * time.Second
	deadline := time.Now().Add(patience)
	for {
		switch inspectPID(pid, c.dir) {
		case pidGone, pidUnknown:
			return nil
		case pidOther:
			c.log.Info("removing stale postmaster.pid", "dir", c.dir, "pid", pid)
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("pgcluster: remove stale %s: %w", path, err)
			}
			return nil
		case pidPostmaster:
			if time.Now().After(deadline) {
				return fmt.Errorf("pgcluster: another postgres (pid %d) is running on data dir %s; stop it first", pid, c.dir)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: waiting for postgres pid %d on %s to exit: %w", pid, c.dir, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// findBinaries looks on PATH first, then in Debian's versioned directories,
// which `apt-get install postgresql` does not put on PATH.
func findBinaries() (binaries, error) {
	if initdb, err := exec.LookPath("initdb"); err == nil {
		if postgres, err := exec.LookPath("postgres"); err == nil {
			return binaries{initdb: initdb, postgres: postgres}, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Highest major version first; the glob sorts "9.6" after "15", so compare numerically.
	best, bestVer := "", -1.0
	for _, d := range dirs {
		ver, err := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		if err != nil || ver <= bestVer {
			continue
		}
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			best, bestVer = d, ver
		}
	}
	if best == "" {
		return binaries{}, ErrNoBinaries
	}
	return binaries{initdb: filepath.Join(best, "initdb"), postgres: filepath.Join(best, "postgres")}, nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// serverEnv keeps messages of initdb and postgres in English (see lc_messages).
func serverEnv() []string { return append(os.Environ(), "LC_ALL=C") }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logTail returns the last lines written to the log at or after offset.
func logTail(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	const maxTail = 16 << 10
	if fi, err := f.Stat(); err == nil && fi.Size()-offset > maxTail {
		offset = fi.Size() - maxTail
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	b, _ := io.ReadAll(f)
	return lastLines(b, 30)
}

func lastLines(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
