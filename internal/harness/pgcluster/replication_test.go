package pgcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/internal/harness/pgcluster"
	"github.com/intakehq/intake/internal/harness/testenv"
)

// TestFailoverAndRejoin runs the life of a replicated pair: a synchronous
// standby sees the primary's commits; after the primary is killed the
// standby is promoted and takes writes; the old primary comes back, rewound,
// as a standby of the new one and replicates what the new primary wrote. A
// multi-host URL reaches whichever is primary.
func TestFailoverAndRejoin(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rewindable := []string{"wal_log_hints=on", "full_page_writes=on", "wal_keep_size=1GB"}
	a := start(t, pgcluster.Options{Settings: append(rewindable, "synchronous_standby_names=b")})
	b, err := pgcluster.StartStandby(ctx, a, "b", pgcluster.Options{Dir: tempDir(t), Fast: true, Settings: rewindable})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	multi := pgcluster.MultiHostURL("postgres", a, b)

	mustExec(t, multi, "CREATE TABLE t (v int)")
	mustExec(t, multi, "INSERT INTO t VALUES (1)") // returns once b flushed it (synchronous)
	if rec, err := b.InRecovery(ctx); err != nil || !rec {
		t.Fatalf("standby in recovery = %v, %v; want true", rec, err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return count(t, b.URL("postgres"), "t") == 1 },
		"the standby never replayed the primary's commit")

	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := b.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, err := b.InRecovery(ctx); err != nil || rec {
		t.Fatalf("promoted standby in recovery = %v, %v; want false", rec, err)
	}
	mustExec(t, multi, "INSERT INTO t VALUES (2)") // the multi-host URL finds b
	if n := count(t, b.URL("postgres"), "t"); n != 2 {
		t.Fatalf("new primary holds %d rows, want 2", n)
	}

	if err := a.Follow(ctx, b, "a"); err != nil {
		t.Fatal(err)
	}
	if rec, err := a.InRecovery(ctx); err != nil || !rec {
		t.Fatalf("old primary after Follow in recovery = %v, %v; want true", rec, err)
	}
	mustExec(t, multi, "INSERT INTO t VALUES (3)")
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(a.Dir(), pgcluster.LogFile))
			t.Logf("old primary log:\n%s", b[max(0, len(b)-3000):])
		}
	}()
	testenv.Eventually(t, 30*time.Second, func() bool { return count(t, a.URL("postgres"), "t") == 3 },
		"the old primary never replayed the new primary's commits")
}

// TestPauseResume stops a server's processes and continues them: a commit
// on a primary whose synchronous standby is paused waits (the standby's
// walreceiver is stopped too, not only its postmaster), and returns once
// the standby is resumed and has caught up.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := start(t, pgcluster.Options{Settings: []string{"synchronous_standby_names=b"}})
	b, err := pgcluster.StartStandby(ctx, a, "b", pgcluster.Options{Dir: tempDir(t), Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Resume(); _ = b.Stop(context.Background()) })
	mustExec(t, a.URL("postgres"), "CREATE TABLE t (v int)") // synchronous: b has it
	if err := b.Pause(); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	go func() {
		conn, err := pgx.Connect(ctx, a.URL("postgres"))
		if err == nil {
			defer conn.Close(context.Background())
			_, err = conn.Exec(ctx, "INSERT INTO t VALUES (1)")
		}
		committed <- err
	}()
	// A negative: nothing to wait on but time. A second is ample for a
	// commit that does not wait.
	select {
	case err := <-committed:
		t.Fatalf("a commit returned (err %v) while the synchronous standby was paused: Pause did not stop its walreceiver", err)
	case <-time.After(time.Second):
	}
	if err := b.Resume(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-committed:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the commit never returned after the standby resumed")
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return count(t, b.URL("postgres"), "t") == 1 },
		"the resumed standby never caught up")
}
