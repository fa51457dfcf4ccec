package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoPgBouncer means the pgbouncer binary is not on PATH (nor in
// /usr/sbin, where Debian's package puts it).
var ErrNoPgBouncer = errors.New("pgcluster: pgbouncer not found on PATH or in /usr/sbin " +
	"(Debian: apt-get install pgbouncer)")

// BouncerOptions configures a PgBouncer in front of a server.
type BouncerOptions struct {
	// Dir holds the generated pgbouncer.ini, userlist.txt and
	// pgbouncer.log. Required; created when missing.
	Dir string
	// Upstream is a postgres:// URL of the server (its host, port, user
	// and password; the database part is ignored): every database name a
	// client asks for is passed through to it.
	Upstream string
	// PoolMode is pgbouncer's pool_mode. Defaults to "transaction".
	PoolMode string
	// PoolSize is default_pool_size, the server connections per database
	// and user. Defaults to 10.
	PoolSize int
}

// Bouncer is a pgbouncer child process listening on 127.0.0.1.
type Bouncer struct {
	port int
	user string
	pass string
	dir  string
	proc *process
}

// StartBouncer writes a configuration that authenticates clients as the
// upstream user (auth_type trust: the test cluster trusts 127.0.0.1 too)
// and starts pgbouncer in the foreground as a child, as the OS user
// postgres when we are root (pgbouncer refuses root like postgres). It
// returns once a client connects through it.
func StartBouncer(ctx context.Context, opts BouncerOptions) (*Bouncer, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if bin = "/usr/sbin/pgbouncer"; !isExecutable(bin) {
			return nil, ErrNoPgBouncer
		}
	}
	up, err := url.Parse(opts.Upstream)
	if err != nil || up.Hostname() == "" {
		return nil, fmt.Errorf("pgcluster: pgbouncer upstream %q: want a postgres://user@host:port URL", opts.Upstream)
	}
	upPort := up.Port()
	if upPort == "" {
		upPort = "5432"
	}
	user := up.User.Username()
	if user == "" {
		user = "postgres"
	}
	pass, _ := up.User.Password()
	mode := opts.PoolMode
	if mode == "" {
		mode = "transaction"
	}
	size := opts.PoolSize
	if size == 0 {
		size = 10
	}
	owner, err := lookupOwner()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgcluster: pgbouncer dir: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // os.MkdirTemp's are 0700
		return nil, fmt.Errorf("pgcluster: pgbouncer dir: %w", err)
	}
	if owner != nil {
		if err := owner.checkReach(dir); err != nil {
			return nil, fmt.Errorf("pgcluster: pgbouncer: %w", err)
		}
	}
	b := &Bouncer{user: user, pass: pass, dir: dir}
	const attempts = 3 // a picked port can be taken before pgbouncer binds it
	for attempt := 1; ; attempt++ {
		if b.port, err = freePort(); err != nil {
			return nil, err
		}
		upstream := fmt.Sprintf("host=%s port=%s user=%s", up.Hostname(), upPort, user)
		if pass != "" {
			upstream += " password=" + pass
		}
		ini := strings.Join([]string{
			"[databases]",
			"* = " + upstream,
			"[pgbouncer]",
			"listen_addr = 127.0.0.1",
			"listen_port = " + strconv.Itoa(b.port),
			"unix_socket_dir =",
			"auth_type = trust",
			"auth_file = " + filepath.Join(dir, "userlist.txt"),
			"pool_mode = " + mode,
			"default_pool_size = " + strconv.Itoa(size),
			"max_client_conn = 500",
			"server_reset_query = DISCARD ALL",
			"ignore_startup_parameters = extra_float_digits",
			"",
		}, "\n")
		if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
			return nil, err
		}
		userlist := fmt.Sprintf("%q %q\n", user, pass)
		if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(userlist), 0o644); err != nil {
			return nil, err
		}
		if owner != nil {
			if err := owner.chownTree(dir); err != nil {
				return nil, err
			}
		}
		if err = b.start(ctx, bin, owner); err == nil {
			return b, nil
		}
		if attempt == attempts || !strings.Contains(err.Error(), "in use") {
			return nil, err
		}
	}
}

func (b *Bouncer) start(ctx context.Context, bin string, owner *osUser) error {
	logPath := filepath.Join(b.dir, "pgbouncer.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fi, _ := logFile.Stat()
	offset := fi.Size()
	cmd := exec.Command(bin, filepath.Join(b.dir, "pgbouncer.ini"))
	cmd.Dir = b.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr(owner, true)
	p, err := startProcess(cmd)
	if err != nil {
		_ = logFile.Close()
		return fmt.Errorf("pgcluster: start pgbouncer: %w", err)
	}
	p.logFile = logFile
	b.proc = p
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		if lastErr = b.ping(ctx); lastErr == nil {
			return nil
		}
		select {
		case <-p.done:
			p.release()
			return fmt.Errorf("pgcluster: pgbouncer exited at start (%v): %s", p.waitErr, logTail(logPath, offset))
		case <-ctx.Done():
			_ = b.Stop()
			return fmt.Errorf("pgcluster: waiting for pgbouncer: %w (last attempt: %v): %s", ctx.Err(), lastErr, logTail(logPath, offset))
		case <-tick.C:
		}
	}
}

func (b *Bouncer) ping(ctx context.Context) error { return ping(ctx, b.URL("postgres")) }

// URL is the connection URL of database through the pooler.
func (b *Bouncer) URL(database string) string {
	u := url.URL{Scheme: "postgres", Host: "127.0.0.1:" + strconv.Itoa(b.port), Path: "/" + database,
		RawQuery: "sslmode=disable"}
	if b.pass != "" {
		u.User = url.UserPassword(b.user, b.pass)
	} else {
		u.User = url.User(b.user)
	}
	return u.String()
}

// Log is the end of pgbouncer's log: its last 40 lines.
func (b *Bouncer) Log() string {
	out, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
	return lastLines(out, 40)
}

// Stop shuts pgbouncer down at once (SIGTERM: its immediate shutdown,
// clients disconnected) and waits for it.
func (b *Bouncer) Stop() error {
	p := b.proc
	if p == nil || p.exited() {
		return nil
	}
	defer p.release()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pgcluster: stop pgbouncer: %w", err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("pgcluster: pgbouncer did not stop on SIGTERM within 30s; killed it")
	}
}
