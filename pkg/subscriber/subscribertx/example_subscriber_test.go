package subscribertx_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/envelope"
)

// TestExampleSubscriberRecordsEachEventOnce runs examples/subscriber: it
// applies the schema itself, records each event once in
// example_subscriber.events, acks a re-execution unapplied, and stops on
// an interrupt.
func TestExampleSubscriberRecordsEachEventOnce(t *testing.T) {
	t.Parallel()
	bin := testenv.GoBuild(t, "github.com/intakehq/intake/examples/subscriber")
	j, pool, dbURL := setupURL(t)
	publishOut(t, j.JS, "evt_1", "exec-1")
	publishOut(t, j.JS, "evt_2", "exec-2")
	publishOut(t, j.JS, "evt_1", "exec-1b") // an operator re-executed evt_1

	cmd := exec.Command(bin, "-nats", j.Server.URL(), "-tenant", "acme")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	var out testenv.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	testenv.Eventually(t, time.Minute, func() bool {
		info, err := j.JS.Consumer(context.Background(), envelope.StreamOut, "example-subscriber")
		return err == nil && info.CachedInfo().NumPending == 0 && info.CachedInfo().NumAckPending == 0 &&
			info.CachedInfo().Delivered.Consumer >= 3
	}, "examples/subscriber did not ack its three messages")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("examples/subscriber: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("examples/subscriber did not stop on an interrupt:\n%s", out.String())
	}
	var n int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM example_subscriber.events WHERE (key, execution_id) IN (('demo/main/evt_1', 'exec-1'), ('demo/main/evt_2', 'exec-2'))`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	var all int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM example_subscriber.events`).Scan(&all); err != nil {
		t.Fatal(err)
	}
	if n != 2 || all != 2 {
		t.Fatalf("example_subscriber.events: %d rows of the two events, %d in all; want 2 and 2 (the re-execution acked unapplied)\n%s", n, all, out.String())
	}
}
