package subscribertx_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/subscriber"
	"github.com/intakehq/intake/pkg/subscriber/subscribertx"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// publishOut publishes a processed-style message, as the processor's outbox
// relay does, for event id under execution.
func publishOut(t *testing.T, js jetstream.JetStream, id, execution string) {
	t.Helper()
	k := envelope.Key{Integration: "demo", Account: "main", EventID: id}
	m := nats.NewMsg(envelope.SubjectOut("acme", "demo", "invoice.paid"))
	m.Data = []byte(`{"id":"` + id + `"}`)
	m.Header.Set(envelope.HeaderMsgID, execution)
	m.Header.Set(envelope.HeaderKey, k.String())
	m.Header.Set(envelope.HeaderTenant, "acme")
	m.Header.Set(envelope.HeaderEventType, "invoice.paid")
	m.Header.Set(envelope.HeaderExecutionID, execution)
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// setup starts an embedded NATS with INTAKE_OUT and a fresh database with
// the inbox schema and a business table, payments.
func setup(t *testing.T) (*testrig.JetStream, *pgxpool.Pool) {
	t.Helper()
	j, pool, _ := setupURL(t)
	return j, pool
}

// setupURL is setup, also returning the database's URL.
func setupURL(t *testing.T) (*testrig.JetStream, *pgxpool.Pool, string) {
	t.Helper()
	j := testrig.NATS(t, config.Stream{})
	ctx := context.Background()
	dbURL := testenv.Postgres(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := subscribertx.EnsureSchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := subscribertx.EnsureSchema(ctx, pool); err != nil {
		t.Fatalf("schema applied twice: %v", err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE payments (consumer text, key text, execution_id text)`); err != nil {
		t.Fatal(err)
	}
	return j, pool, dbURL
}

// consumeUntilDone runs ConsumeTx as durable, each run on a connection of
// its own, like a process. The handler inserts a payment; for a key in
// kill, on its first delivery, it closes the run's NATS connection, so the
// transaction commits and the ack is never sent: the run dies between its
// commit and its ack (and handles nothing more), and a new run takes over. It returns once the
// consumer has nothing pending or awaiting an ack, and reports how many
// deliveries JetStream made.
func consumeUntilDone(t *testing.T, j *testrig.JetStream, pool *pgxpool.Pool, durable string, reexecute bool, kill map[string]bool) uint64 {
	t.Helper()
	var mu sync.Mutex
	killed := map[string]bool{}
	o := subscribertx.Options{Options: subscriber.Options{Durable: durable, AckWait: time.Second, Backoff: []time.Duration{50 * time.Millisecond}}, Reexecute: reexecute}
	for run := 0; ; run++ {
		if run > len(kill)+1 {
			t.Fatalf("%d runs for %d kills", run, len(kill))
		}
		nc, js := testrig.Connect(t, j.Server.URL())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		dead := false // this run was killed: it changes nothing more
		go func() {
			done <- subscribertx.ConsumeTx(ctx, js, pool, o, func(ctx context.Context, tx pgx.Tx, m subscriber.Message) error {
				mu.Lock()
				isDead := dead
				mu.Unlock()
				if isDead {
					return errors.New("dead") // a message it had buffered: rolled back, never acked
				}
				if _, err := tx.Exec(ctx, `INSERT INTO payments VALUES ($1, $2, $3)`, durable, m.Key.String(), m.ExecutionID); err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				if id := m.Key.EventID + "|" + m.ExecutionID; kill[id] && !killed[id] {
					killed[id], dead = true, true
					nc.Close() // the commit follows; the ack cannot
				}
				return nil
			})
		}()
		finished := func() bool {
			info, err := j.JS.Consumer(context.Background(), envelope.StreamOut, durable)
			return err == nil && info.CachedInfo().NumPending == 0 && info.CachedInfo().NumAckPending == 0 &&
				info.CachedInfo().Delivered.Consumer > 0
		}
		var err error
		select {
		case err = <-done: // killed
		case <-waitFor(t, finished):
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			info, err := j.JS.Consumer(context.Background(), envelope.StreamOut, durable)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(killed) != len(kill) {
				t.Fatalf("killed after %v, want after each of %v", killed, kill)
			}
			return info.CachedInfo().Delivered.Consumer
		}
		cancel()
		if err == nil {
			t.Fatalf("run %d stopped without an error on a closed connection", run)
		}
		t.Logf("run %d died between commit and ack: %v", run, err)
	}
}

// waitFor closes its channel once cond holds, polling until the test ends.
func waitFor(t *testing.T, cond func() bool) <-chan struct{} {
	c := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for {
			if cond() {
				close(c)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return c
}

func payments(t *testing.T, pool *pgxpool.Pool, durable string) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT key, execution_id FROM payments WHERE consumer = $1`, durable)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var k, e string
		if err := rows.Scan(&k, &e); err != nil {
			t.Fatal(err)
		}
		got[k+"|"+e]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestKilledBetweenCommitAndAckAppliesOnce: a subscriber killed after its
// commit and before its ack, twice, gets those messages again and changes
// nothing: every event is one payment, none twice, none lost.
func TestKilledBetweenCommitAndAckAppliesOnce(t *testing.T) {
	t.Parallel()
	j, pool := setup(t)
	const n = 20
	for i := range n {
		publishOut(t, j.JS, fmt.Sprintf("evt_%d", i), fmt.Sprintf("exec-%d", i))
	}
	kill := map[string]bool{"evt_3|exec-3": true, "evt_11|exec-11": true}
	delivered := consumeUntilDone(t, j, pool, "billing", false, kill)
	if delivered < n+uint64(len(kill)) {
		t.Fatalf("%d deliveries, want at least %d: the killed messages were not redelivered", delivered, n+len(kill))
	}
	got := payments(t, pool, "billing")
	for i := range n {
		if k := fmt.Sprintf("demo/main/evt_%d|exec-%d", i, i); got[k] != 1 {
			t.Errorf("%s: %d payments, want 1", k, got[k])
		}
	}
	if len(got) != n {
		t.Errorf("payments %v, want the %d events once each", got, n)
	}
}

// TestReexecutionAppliedOnlyWhenAsked: a re-execution (same key, new
// execution id) is acked unapplied by default, and applied again with
// Options.Reexecute — once, even when killed between its commit and ack.
func TestReexecutionAppliedOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	j, pool := setup(t)
	publishOut(t, j.JS, "evt_1", "exec-1")
	publishOut(t, j.JS, "evt_2", "exec-2")
	publishOut(t, j.JS, "evt_1", "exec-1b") // an operator re-executed evt_1

	consumeUntilDone(t, j, pool, "plain", false, nil)
	if got, want := payments(t, pool, "plain"), map[string]int{"demo/main/evt_1|exec-1": 1, "demo/main/evt_2|exec-2": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("without Reexecute: payments %v, want %v", got, want)
	}

	consumeUntilDone(t, j, pool, "again", true, map[string]bool{"evt_1|exec-1b": true})
	want := map[string]int{"demo/main/evt_1|exec-1": 1, "demo/main/evt_2|exec-2": 1, "demo/main/evt_1|exec-1b": 1}
	if got := payments(t, pool, "again"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("with Reexecute: payments %v, want %v", got, want)
	}
}

// TestConsumeTxRefusesWithoutItsTable: without the inbox table, or without
// a pool, ConsumeTx refuses to start, saying what to do.
func TestConsumeTxRefusesWithoutItsTable(t *testing.T) {
	t.Parallel()
	j := testrig.NATS(t, config.Stream{})
	pool, err := pgxpool.New(context.Background(), testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h := func(context.Context, pgx.Tx, subscriber.Message) error { return nil }
	o := subscribertx.Options{Options: subscriber.Options{Durable: "billing"}}
	err = subscribertx.ConsumeTx(context.Background(), j.JS, pool, o, h)
	if err == nil || !strings.Contains(err.Error(), "intake_subscriber.handled does not exist: apply subscriber.Schema") {
		t.Fatalf("ConsumeTx without the schema: %v, want it refused naming the table", err)
	}
	if err := subscribertx.ConsumeTx(context.Background(), j.JS, nil, o, h); err == nil || !strings.Contains(err.Error(), "pool: required") {
		t.Fatalf("ConsumeTx without a pool: %v, want it refused", err)
	}
}
