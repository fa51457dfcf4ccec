package subscribertx_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/envelope"
)

// nodeSubscriber installs examples/subscriber-node (npm ci, from its
// package-lock.json) in a directory of the test's and returns it; it skips
// the test when node or npm is not installed.
func nodeSubscriber(t *testing.T) string {
	t.Helper()
	return testenv.NodeExample(t, filepath.Join("..", "..", "..", "examples", "subscriber-node"))
}

// nodeSetup is setupURL with the Node example's business table.
func nodeSetup(t *testing.T) (*testrig.JetStream, *pgxpool.Pool, string) {
	t.Helper()
	j, pool, dbURL := setupURL(t)
	if _, err := pool.Exec(context.Background(), `CREATE SCHEMA example_subscriber;
CREATE TABLE example_subscriber.events (key text, execution_id text, event_type text, body jsonb, received_at timestamptz DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	return j, pool, dbURL
}

// runNode runs the Node subscriber from dir as durable, with env added,
// restarting it each time its fault hook (KILL_AFTER_COMMIT, in env) kills
// it, until the consumer has nothing pending or awaiting an ack. It returns
// how many times the subscriber was killed.
func runNode(t *testing.T, dir string, j *testrig.JetStream, dbURL, durable string, env ...string) int {
	t.Helper()
	ctx := context.Background()
	finished := func() bool {
		info, err := j.JS.Consumer(ctx, envelope.StreamOut, durable)
		return err == nil && info.CachedInfo().NumPending == 0 && info.CachedInfo().NumAckPending == 0 &&
			info.CachedInfo().Delivered.Consumer > 0
	}
	deaths := 0
	for run := 0; ; run++ {
		if run > 5 {
			t.Fatalf("%d runs of the Node subscriber and not done", run)
		}
		runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		cmd := exec.CommandContext(runCtx, "node", "index.js")
		cmd.Dir = dir
		var out testenv.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Env = append(append(os.Environ(), "DATABASE_URL="+dbURL, "NATS_URL="+j.Server.URL(),
			"DURABLE="+durable, "ACK_WAIT_MS=1000"), env...)
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			cancel()
			if cmd.ProcessState == nil || cmd.ProcessState.String() != "signal: killed" {
				t.Fatalf("run %d: node exited (%v), not killed by its fault hook:\n%s", run, err, out.String())
			}
			deaths++
			t.Logf("run %d killed between commit and ack", run)
			continue
		case <-waitFor(t, finished):
		}
		_ = cmd.Process.Kill()
		<-exited
		cancel()
		return deaths
	}
}

// nodeRows counts the Node subscriber's business rows by key|execution.
func nodeRows(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT key || '|' || execution_id, count(*) FROM example_subscriber.events GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var k string
		var c int
		if err := rows.Scan(&k, &c); err != nil {
			t.Fatal(err)
		}
		got[k] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestNodeSubscriberKilledBetweenCommitAndAckAppliesOnce: the Node
// subscriber, SIGKILLed by its fault hook right after a commit and before
// its ack, twice, is restarted, gets those messages again and changes
// nothing: every event is one row, none twice, none lost; a re-execution
// copy is acked unapplied.
func TestNodeSubscriberKilledBetweenCommitAndAckAppliesOnce(t *testing.T) {
	t.Parallel()
	dir := nodeSubscriber(t)
	j, pool, dbURL := nodeSetup(t)
	const n = 10
	for i := range n {
		publishOut(t, j.JS, fmt.Sprintf("evt_%d", i), fmt.Sprintf("exec-%d", i))
	}
	publishOut(t, j.JS, "evt_4", "exec-4b") // an operator re-executed evt_4
	deaths := runNode(t, dir, j, dbURL, "node-subscriber", "KILL_AFTER_COMMIT=demo/main/evt_2|exec-2,demo/main/evt_6|exec-6")
	if deaths != 2 {
		t.Fatalf("node was killed %d times, want 2", deaths)
	}
	got := nodeRows(t, pool)
	for i := range n {
		if k := fmt.Sprintf("demo/main/evt_%d|exec-%d", i, i); got[k] != 1 {
			t.Errorf("%s: %d rows, want 1", k, got[k])
		}
	}
	if len(got) != n {
		t.Errorf("rows %v, want the %d events once each (the re-execution not applied)", got, n)
	}
}

// TestNodeSubscriberReexecutes: with REEXECUTE=1 the Node subscriber
// applies a re-execution again, once, even killed between its commit and
// its ack.
func TestNodeSubscriberReexecutes(t *testing.T) {
	t.Parallel()
	dir := nodeSubscriber(t)
	j, pool, dbURL := nodeSetup(t)
	publishOut(t, j.JS, "evt_1", "exec-1")
	publishOut(t, j.JS, "evt_2", "exec-2")
	publishOut(t, j.JS, "evt_1", "exec-1b") // an operator re-executed evt_1
	if deaths := runNode(t, dir, j, dbURL, "node-again", "REEXECUTE=1", "KILL_AFTER_COMMIT=demo/main/evt_1|exec-1b"); deaths != 1 {
		t.Fatalf("node was killed %d times, want 1", deaths)
	}
	want := map[string]int{"demo/main/evt_1|exec-1": 1, "demo/main/evt_2|exec-2": 1, "demo/main/evt_1|exec-1b": 1}
	if got := nodeRows(t, pool); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rows %v, want %v", got, want)
	}
}
