package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/internal/harness/pgcluster"
)

// startTimeout bounds initdb plus server start; generous because parallel
// test binaries share two cores.
const startTimeout = 2 * time.Minute

// shared is the one Postgres per test binary behind Postgres. It has to be
// package state: tests share it, and Main, which stops it, runs outside any
// test. It is written once (sync.Once) and stopped once, after all tests.
var shared struct {
	once     sync.Once
	adminURL string // where CREATE DATABASE runs
	cluster  *pgcluster.Cluster
	dir      string
	err      error
}

// Postgres returns the URL of a fresh, empty database for this test, dropped
// (WITH (FORCE), so leftover connections do not keep it) when the test ends.
// The database lives on the server at DATABASE_URL when that is set, and
// otherwise on a cluster started on first use and shared by the whole test
// binary; Main stops it. INTAKE_TEST_QUERY_MODE, when set, goes into the
// URL as default_query_exec_mode: any package's tests then run in that pgx
// query mode (exec, simple_protocol, …; docs/scaling.md).
func Postgres(t testing.TB) string {
	t.Helper()
	return createDatabase(t, sharedAdminURL(t), "")
}

// createDatabase creates a database with a random name on the server at
// admin (CREATE DATABASE name, then with), drops it when the test ends and
// returns its URL.
func createDatabase(t testing.TB, admin, with string) string {
	t.Helper()
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatal("testenv: DATABASE_URL must be a postgres:// URL (keyword=value strings are not supported)")
	}
	name := "t_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	create := "CREATE DATABASE " + name
	if with != "" {
		create += " " + with
	}
	if err := execAdmin(ctx, admin, create); err != nil {
		t.Fatalf("testenv: create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := execAdmin(ctx, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("testenv: drop test database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	if m := os.Getenv("INTAKE_TEST_QUERY_MODE"); m != "" {
		q := u.Query()
		q.Set("default_query_exec_mode", m)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

func sharedAdminURL(t testing.TB) string {
	t.Helper()
	if !mainRunning.Load() {
		t.Fatal("testenv.Postgres needs the package's TestMain to call testenv.Main, which stops the shared cluster: " +
			"add func TestMain(m *testing.M) { testenv.Main(m) }")
	}
	shared.once.Do(func() {
		if env := os.Getenv("DATABASE_URL"); env != "" {
			shared.adminURL = env
			return
		}
		// A fresh temp dir of its own rather than t.TempDir(): the cluster
		// outlives this test, and as root postgres must be able to enter the
		// directory's parent, which t.TempDir's 0700 root-owned one forbids.
		dir, err := os.MkdirTemp("", "intake-testpg-")
		if err != nil {
			shared.err = fmt.Errorf("temp dir: %w", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: true})
		if err != nil {
			_ = os.RemoveAll(dir)
			shared.err = err
			return
		}
		shared.cluster, shared.dir, shared.adminURL = c, dir, c.URL("postgres")
	})
	if shared.err != nil {
		t.Fatalf("testenv: shared Postgres cluster: %v", shared.err)
	}
	return shared.adminURL
}

// stopShared stops the shared cluster, if one was started, and removes its
// directory. Main calls it after all tests.
func stopShared() error {
	if shared.cluster == nil {
		return dropTemplates() // on the server at DATABASE_URL, if any
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := shared.cluster.Stop(ctx)
	if rmErr := os.RemoveAll(shared.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("remove %s: %w", shared.dir, rmErr))
	}
	shared.cluster = nil
	if err != nil {
		return fmt.Errorf("stop shared Postgres cluster: %w", err)
	}
	return nil
}

// PG is a Postgres cluster private to one test, for fault injection.
type PG struct {
	cluster *pgcluster.Cluster
}

// PrivatePostgres starts a cluster only this test uses, with an empty
// database "intake" (see URL), and stops it when the test ends. It needs the
// server binaries even when DATABASE_URL is set: an external server cannot
// be restarted or killed from a test, so then the test is skipped instead.
func PrivatePostgres(t testing.TB) *PG {
	t.Helper()
	return privatePostgres(t, true)
}

// DurablePostgres is PrivatePostgres with fsync on, as in production:
// benchmarks that measure commit cost need it.
func DurablePostgres(t testing.TB) *PG {
	t.Helper()
	return privatePostgres(t, false)
}

// clusterDir is a data directory for a test's cluster, removed when the
// test ends; not t.TempDir(): see sharedAdminURL.
func clusterDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatalf("testenv: temp dir: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("testenv: remove %s: %v", dir, err)
		}
	})
	return dir
}

func privatePostgres(t testing.TB, fast bool) *PG {
	t.Helper()
	dir := clusterDir(t, "intake-pg-")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: fast})
	if errors.Is(err, pgcluster.ErrNoBinaries) && os.Getenv("DATABASE_URL") != "" {
		t.Skipf("testenv: fault injection needs a private cluster: %v", err)
	}
	if err != nil {
		t.Fatalf("testenv: private Postgres cluster: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	if err := execAdmin(ctx, c.URL("postgres"), "CREATE DATABASE intake"); err != nil {
		t.Fatalf("testenv: create database intake: %v", err)
	}
	return &PG{cluster: c}
}

// URL is the URL of the database "intake". It stays valid across restarts.
func (p *PG) URL() string { return p.cluster.URL("intake") }

// Cluster exposes the cluster, e.g. for URLs of other databases.
func (p *PG) Cluster() *pgcluster.Cluster { return p.cluster }

// Restart stops the server with a fast shutdown and starts it again on the
// same port and data; open connections break and new ones succeed.
func (p *PG) Restart(t testing.TB) {
	t.Helper()
	p.Stop(t)
	p.Start(t)
}

// Stop shuts the server down (fast mode) and waits for it.
func (p *PG) Stop(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.cluster.Stop(ctx); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// Start starts the server again after Stop or Kill and waits until it accepts
// connections (after Kill, once crash recovery is done).
func (p *PG) Start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := p.cluster.Start(ctx); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// Kill crashes the server (SIGKILL to postmaster and backends). Call Start to
// bring it back through crash recovery.
func (p *PG) Kill(t testing.TB) {
	t.Helper()
	if err := p.cluster.Kill(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

func execAdmin(ctx context.Context, connURL, sql string) error {
	conn, err := connectAdmin(ctx, connURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

func connectAdmin(ctx context.Context, connURL string) (*pgx.Conn, error) {
	return pgx.Connect(ctx, connURL)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand since Go 1.24)
	return hex.EncodeToString(b)
}
