package pgcluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/internal/harness/pgcluster"
	"github.com/intakehq/intake/internal/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// start starts a Fast cluster in a fresh directory and stops it at the end.
func start(t *testing.T, opts pgcluster.Options) *pgcluster.Cluster {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = tempDir(t)
	}
	opts.Fast = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, opts)
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return c
}

// tempDir is not t.TempDir(): as root, postgres runs as another user, which
// cannot enter t.TempDir's 0700 parent.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func mustExec(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func count(t *testing.T, url, table string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStopStartKeepsData(t *testing.T) {
	t.Parallel()
	c := start(t, pgcluster.Options{})
	ctx := context.Background()
	url := c.URL("postgres")
	port := c.Port()
	if want := "127.0.0.1:"; !strings.Contains(url, want) {
		t.Fatalf("URL %q does not contain %q", url, want)
	}
	mustExec(t, url, "CREATE TABLE kept (v int)")
	mustExec(t, url, "INSERT INTO kept VALUES (1)")

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := pgx.Connect(ctx, url); err == nil {
		t.Fatal("connected to a stopped cluster")
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Port() != port {
		t.Fatalf("port changed across restart: %d, then %d", port, c.Port())
	}
	if n := count(t, url, "kept"); n != 1 {
		t.Fatalf("rows after restart = %d, want 1", n)
	}
}

// TestKillThenStart crashes the server right after a commit: the commit must
// survive (Fast keeps synchronous_commit on for this), and the stale
// postmaster.pid must not stop the next start.
func TestKillThenStart(t *testing.T) {
	t.Parallel()
	c := start(t, pgcluster.Options{})
	url := c.URL("postgres")
	mustExec(t, url, "CREATE TABLE crash (v int)")
	mustExec(t, url, "INSERT INTO crash SELECT generate_series(1, 1000)")

	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), "postmaster.pid")); err != nil {
		t.Fatalf("after Kill postmaster.pid should be left behind like after a real crash: %v", err)
	}
	if err := c.Kill(); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, url, "crash"); n != 1000 {
		t.Fatalf("rows after crash recovery = %d, want 1000", n)
	}
}

// TestSecondClusterOnTakenPort checks that a start failure carries the tail of
// the server log, which is where postgres says what went wrong.
func TestSecondClusterOnTakenPort(t *testing.T) {
	t.Parallel()
	first := start(t, pgcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	second, err := pgcluster.Start(ctx, pgcluster.Options{Dir: tempDir(t), Port: first.Port(), Fast: true})
	if err == nil {
		_ = second.Stop(ctx)
		t.Fatal("second cluster started on a port already in use")
	}
	if !strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("error lacks the log line naming the cause: %v", err)
	}
	t.Log(err)
}

// TestUnreachableDirAsRoot: as root, postgres runs as the postgres user and
// must be told plainly when it cannot reach the data directory.
func TestUnreachableDirAsRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root hands the data directory to another user")
	}
	dir := filepath.Join(t.TempDir(), "data") // parent is 0700, owned by root
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: true})
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skip(err)
	}
	if err == nil {
		_ = c.Stop(ctx)
		t.Fatal("started in a directory postgres cannot reach")
	}
	if !strings.Contains(err.Error(), "cannot enter") {
		t.Fatalf("unclear error: %v", err)
	}
	t.Log(err)
}
