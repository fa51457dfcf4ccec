package chaos

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/internal/harness/pgcluster"
)

// TestPausedStandbyKeepsInFlightCommit is NoCut's premise on two servers:
// a commit waiting for a synchronous standby whose walreceiver is paused
// fails at its client when the primary dies, yet once the walreceiver is
// resumed and the standby promoted, the commit is there — it landed
// before its connection died.
func TestPausedStandbyKeepsInFlightCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("two Postgres servers: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := func() string {
		d, err := os.MkdirTemp("", "chaos-pause-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(d) })
		return d
	}
	a, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir(), Fast: true,
		Settings: []string{"synchronous_standby_names=" + firstStandby, "synchronous_commit=on"}})
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	b, err := pgcluster.StartStandby(ctx, a, firstStandby, pgcluster.Options{Dir: dir(), Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	primary, standby := &pgServer{a, firstPrimary}, &pgServer{b, firstStandby}

	conn, err := pgx.Connect(ctx, a.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (v int)"); err != nil {
		t.Fatal(err)
	}
	resume, err := pauseWalReceiver(ctx, standby)
	if err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "INSERT INTO t VALUES (1)") // waits for the paused standby
		committed <- err
	}()
	time.Sleep(300 * time.Millisecond) // the commit waits on the standby; nothing else to wait on
	select {
	case err := <-committed:
		t.Fatalf("commit returned while the standby was paused: %v", err)
	default:
	}
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err == nil {
		t.Fatal("the commit succeeded at its client although the primary died before the standby answered")
	}
	if err := resume(); err != nil {
		t.Fatal(err)
	}
	waitReceived(ctx, standby)
	if err := b.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := queryPrimary(ctx, standby, "SELECT count(*) FROM t", nil, &n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("new primary holds %d rows; want the commit whose client saw its connection die", n)
	}
}
