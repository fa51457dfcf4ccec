package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	neturl "net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/intakehq/intake/internal/backoff"
)

// Schema holds every Intake table.
const Schema = "intake"

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("store: not found")

//go:embed migrations/*.sql
var migrations embed.FS

// Store wraps the pool. Methods that must join the caller's transaction take
// a pgx.Tx instead.
type Store struct {
	pool *pgxpool.Pool

	mu        sync.Mutex
	abandoned map[string]backend // by replay id: lock sessions given up (ReplayLock.Release)
}

// Open connects a pool to url and checks the connection.
//
// When a server answers that it is read-only (ReadOnly) or shutting down,
// the pool drops all its connections (pgxpool's Reset), for every caller of
// the Store alike: the next statement connects again, and a multi-host url
// with target_session_attrs=read-write finds the writable primary after a
// failover instead of writing to a standby until each connection failed once.
func Open(ctx context.Context, url string, maxConns int32) (*Store, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, hidePasswords(fmt.Errorf("store: postgres url: %w", err), url)
	}
	if maxConns > 0 {
		pc.MaxConns = maxConns
	}
	pc.AfterConnect = RegisterTypes // every query mode (querymode.go)
	withDeadlines(&pc.ConnConfig.Config, url)
	var reset atomic.Pointer[pgxpool.Pool] // set once the pool exists
	var lastReset atomic.Int64             // unix nanoseconds
	onPgError := pc.ConnConfig.OnPgError
	pc.ConnConfig.OnPgError = func(c *pgconn.PgConn, e *pgconn.PgError) bool {
		if p := reset.Load(); p != nil && serverGone(e.Code) {
			// Safe with connections checked out: they are closed as
			// they come back, this one included. At most once a second:
			// a failover brings a burst of these errors, and an
			// administrator terminating one backend (57P01) must not
			// empty the pool over and over.
			now, last := time.Now().UnixNano(), lastReset.Load()
			if now-last >= int64(time.Second) && lastReset.CompareAndSwap(last, now) {
				p.Reset()
			}
		}
		return onPgError == nil || onPgError(c, e) // pgx's: close on FATAL
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, hidePasswords(fmt.Errorf("store: connect %s: %w", redact(pc.ConnConfig), err), url)
	}
	reset.Store(pool)
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, hidePasswords(fmt.Errorf("store: connect %s: %w", redact(pc.ConnConfig), err), url)
	}
	return &Store{pool: pool}, nil
}

// Pool is the underlying pool for callers that run their own transactions.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// ErrReadOnly is returned by Writable when the database answers but takes no
// writes.
var ErrReadOnly = errors.New("postgres: read-only (a standby or in recovery)")

// Writable checks the database answers and takes writes (readiness of the
// roles that write): not in recovery, transactions not read-only. When it is
// read-only the pool drops its connections, so the next check — and the next
// write — connects again and, with a multi-host url and
// target_session_attrs=read-write, may find the promoted primary.
func (s *Store) Writable(ctx context.Context) error {
	var recovery bool
	var readOnly string
	err := s.pool.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('transaction_read_only')`).
		Scan(&recovery, &readOnly)
	if err != nil {
		return fmt.Errorf("store: writable: %w", err)
	}
	if recovery || readOnly == "on" {
		s.pool.Reset()
		return ErrReadOnly
	}
	return nil
}

// migrateLock names the session-level advisory lock that serialises Migrate.
const migrateLock = `hashtextextended('intake.migrate', 0)`

// DefaultMigrateLockWait is how long Migrate waits for the migration lock
// another session holds before it gives up (sooner when ctx's deadline is
// sooner): long enough for any migration to finish, short enough that a
// lock leaked by a dead session (say, behind a transaction-mode pooler)
// fails `intake migrate` with ErrMigrateLocked instead of hanging it.
const DefaultMigrateLockWait = 5 * time.Minute

// ErrMigrateLocked is wrapped by Migrate's error when another session held
// the migration lock (advisory lock hashtextextended('intake.migrate', 0))
// for all of DefaultMigrateLockWait or until ctx ended. The error names the
// holder's pid when pg_locks shows it: pg_terminate_backend(pid) frees a
// leaked lock.
var ErrMigrateLocked = errors.New("migration lock held by another session")

// migrateUnlockTimeout bounds the unlock and the closing of the lock's
// connection; closing the session releases the lock anyway.
const migrateUnlockTimeout = 5 * time.Second

// lockBackoff spaces the attempts to take the migration lock.
var lockBackoff = backoff.Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second}

// Migrate applies the embedded migrations with goose. Any number of runs
// may go at once (every pod may call it at start): each holds a
// session-level advisory lock, on a connection of its own, around all of it.
// CREATE SCHEMA IF NOT EXISTS is not safe against a concurrent creation (one
// fails on a unique violation), and goose creates its version table before
// taking its own lock (HasPending takes none), so goose's lock alone does
// not cover an empty database. A run waits for the lock at most
// DefaultMigrateLockWait (or until ctx ends), then fails with
// ErrMigrateLocked. Through a transaction-mode pooler, where that lock
// cannot hold, it refuses to run (ErrTransactionPooler).
func Migrate(ctx context.Context, url string, log *slog.Logger) error {
	pc, err := pgx.ParseConfig(url)
	if err != nil {
		return hidePasswords(fmt.Errorf("store: postgres url: %w", err), url)
	}
	withDeadlines(&pc.Config, url)
	fail := func(what string, err error) error {
		return hidePasswords(fmt.Errorf("store: migrate %s: %s%w", redact(pc), what, err), url)
	}
	lock, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return fail("", err)
	}
	// Closing the session releases the lock, also when unlocking fails.
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), migrateUnlockTimeout)
		defer cancel()
		_ = lock.Close(ctx)
	}()
	if pooled, err := probePooler(ctx, pc); err != nil {
		return fail("pooler probe: ", err)
	} else if pooled {
		return fail("", fmt.Errorf("%w: %s", ErrTransactionPooler, PoolerRecipe))
	}
	if err := lockMigrations(ctx, lock, log); err != nil {
		return fail("lock: ", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), migrateUnlockTimeout)
		defer cancel()
		_, _ = lock.Exec(ctx, `SELECT pg_advisory_unlock(`+migrateLock+`)`)
	}()

	db := stdlib.OpenDB(*pc)
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+Schema); err != nil {
		return fail("create schema: ", err)
	}
	p, err := newMigrator(db, log)
	if err != nil {
		return err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fail("", errors.Join(err, disarmOutboxBound(ctx, p, log)))
	}
	if log != nil {
		for _, r := range results {
			log.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "took", r.Duration)
		}
	}
	return nil
}

// lockMigrations takes the migration lock on conn, trying again while
// another session holds it, for at most DefaultMigrateLockWait or until
// ctx ends. It logs the holder once.
func lockMigrations(ctx context.Context, conn *pgx.Conn, log *slog.Logger) error {
	start := time.Now()
	wait, cancel := context.WithTimeout(ctx, DefaultMigrateLockWait)
	defer cancel()
	holder := ""
	for attempt := 0; ; attempt++ {
		var locked bool
		err := conn.QueryRow(wait, `SELECT pg_try_advisory_lock(`+migrateLock+`)`).Scan(&locked)
		if err == nil && locked {
			return nil
		}
		if err != nil && (holder == "" || wait.Err() == nil) {
			return err
		}
		if err == nil && holder == "" {
			holder = migrateLockHolder(wait, conn)
			if log != nil {
				log.Warn("waiting for the migration lock another session holds", "holder", holder,
					"lock", "hashtextextended('intake.migrate', 0)", "max_wait", DefaultMigrateLockWait)
			}
		}
		if err != nil || backoff.Sleep(wait, lockBackoff.Next(attempt)) != nil {
			return fmt.Errorf("%w: advisory lock hashtextextended('intake.migrate', 0) held by %s; gave up after %s: %w",
				ErrMigrateLocked, holder, time.Since(start).Round(time.Millisecond), wait.Err())
		}
	}
}

// migrateLockHolder describes the session holding the migration lock, as
// far as pg_locks and pg_stat_activity show it to this user.
func migrateLockHolder(ctx context.Context, conn *pgx.Conn) string {
	var (
		pid                    int32
		user, app, addr, state string
	)
	err := conn.QueryRow(ctx, `
		SELECT l.pid, coalesce(a.usename::text, ''), coalesce(a.application_name, ''),
		       coalesce(host(a.client_addr), ''), coalesce(a.state, '')
		FROM (SELECT `+migrateLock+` AS k) AS lock, pg_locks AS l
		LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
		  AND l.classid = ((lock.k >> 32) & 4294967295)::oid AND l.objid = (lock.k & 4294967295)::oid
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		LIMIT 1`).Scan(&pid, &user, &app, &addr, &state)
	if err != nil {
		return "another session (not visible in pg_locks)"
	}
	desc := fmt.Sprintf("pid %d", pid)
	for _, kv := range [][2]string{{"user", user}, {"application", app}, {"client", addr}, {"state", state}} {
		if kv[1] != "" {
			desc += fmt.Sprintf(", %s %s", kv[0], kv[1])
		}
	}
	return desc
}

func newMigrator(db *sql.DB, log *slog.Logger) (*goose.Provider, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, err
	}
	opts := []goose.ProviderOption{
		goose.WithTableName(Schema + ".schema_migrations"),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	}
	if log != nil {
		opts = append(opts, goose.WithSlog(log))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, opts...)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	return p, nil
}

// redact names the database without its password, for errors and logs.
func redact(c *pgx.ConnConfig) string {
	return fmt.Sprintf("postgres://%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// passwordError is an error whose text has the database URL's passwords
// masked. pgx masks the ones it recognises, on a best-effort basis; this
// masks them in the whole chain's text whatever the driver wrote, also for a
// URL too malformed to parse. errors.Is/As still see the cause.
type passwordError struct {
	err       error
	passwords []string
}

func (e *passwordError) Error() string {
	s := e.err.Error()
	for _, p := range e.passwords {
		s = strings.ReplaceAll(s, p, "xxxxx")
	}
	return s
}

func (e *passwordError) Unwrap() error { return e.err }

func hidePasswords(err error, url string) error {
	if p := passwordsIn(url); len(p) > 0 {
		return &passwordError{err: err, passwords: p}
	}
	return err
}

var (
	kvPassword  = regexp.MustCompile(`(?i)\b(?:ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)
	urlPassword = regexp.MustCompile(`://[^/@:]*:(.*)@`) // up to the last '@', as a malformed URL may hold more
)

// passwordsIn is every string of url that may be a password, longest first
// (so a shorter one inside a longer one does not leave the rest visible).
func passwordsIn(url string) []string {
	var ps []string
	add := func(p string) {
		if p != "" && !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	if u, err := neturl.Parse(url); err == nil {
		if p, ok := u.User.Password(); ok {
			add(p)
			add(neturl.PathEscape(p))
			add(neturl.QueryEscape(p))
		}
		for _, k := range []string{"password", "sslpassword"} {
			add(u.Query().Get(k))
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(url, -1) {
		add(m[1])
		add(strings.Trim(m[1], "'"))
	}
	if m := urlPassword.FindStringSubmatch(url); m != nil {
		add(m[1])
	}
	slices.SortFunc(ps, func(a, b string) int { return len(b) - len(a) })
	return ps
}

// ErrNotMigrated says the schema is missing or behind this binary.
var ErrNotMigrated = errors.New("store: database schema is not migrated; run `intake migrate`")

// CheckMigrated fails with ErrNotMigrated unless every embedded migration
// has been applied.
func CheckMigrated(ctx context.Context, s *Store) error {
	want, err := latestVersion()
	if err != nil {
		return err
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('intake.schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("store: check migrations: %w", err)
	}
	if !exists {
		return ErrNotMigrated
	}
	var have *int64
	err = s.pool.QueryRow(ctx, `SELECT max(version_id) FROM intake.schema_migrations WHERE is_applied`).Scan(&have)
	if err != nil {
		return fmt.Errorf("store: check migrations: %w", err)
	}
	if have == nil || *have < want {
		return ErrNotMigrated
	}
	return nil
}

func latestVersion() (int64, error) {
	entries, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, e := range entries {
		var v int64
		if _, err := fmt.Sscanf(e[len("migrations/"):], "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest, nil
}
