package processor_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/intakehq/intake/internal/faults"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// rig is a real nats-server and a real Postgres database with the schema and
// a business table, "effects", that the test handler writes one row to per
// applied event — the independent evidence of exactly-once effect. It is
// the shared testrig with this package's helpers.
type rig struct {
	t     testing.TB
	tr    *testrig.Rig
	nats  *testenv.NATSServer
	nc    *nats.Conn
	js    jetstream.JetStream
	dbURL string
	store *store.Store
	db    *pgxpool.Pool
	// relayAfter overrides the relay's outbox.relay_after for later runs.
	relayAfter time.Duration
}

// setup starts NATS and a migrated database: a fresh copy of the template
// when dbURL is empty, else dbURL (migrated here).
func setup(t testing.TB, dbURL string) *rig {
	t.Helper()
	return setupWith(t, testrig.Options{
		DatabaseURL: dbURL,
		Mutate:      func(c *config.Config) { c.NATS.Stream = testrig.TestStream() },
	})
}

// setupWith is setup on a rig built from o.
func setupWith(t testing.TB, o testrig.Options) *rig {
	t.Helper()
	tr := testrig.New(t, o)
	if _, err := tr.DB.Exec(context.Background(), `CREATE TABLE effects (key text NOT NULL, at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, tr: tr, nats: tr.Server, nc: tr.Conn, js: tr.JS, dbURL: tr.DBURL, store: tr.Store, db: tr.DB}
}

// effects is the domain handler: one business row per applied event, then
// the built-in forward to INTAKE_OUT.
func effects() processor.Handler {
	fwd := processor.Forward()
	return processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		if _, err := tx.Exec(ctx, `INSERT INTO effects (key) VALUES ($1)`, ev.Key.String()); err != nil {
			return nil, err
		}
		return fwd.Handle(ctx, tx, ev)
	})
}

// queuedEffects is effects with the business insert queued (Event.Queue).
func queuedEffects() processor.Handler {
	fwd := processor.Forward()
	return processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		ev.Queue(`INSERT INTO effects (key) VALUES ($1)`, ev.Key.String())
		return fwd.Handle(ctx, tx, ev)
	})
}

// demo is the integration the rig's deliveries belong to.
var demo = config.Integration{Name: "demo", Tenant: "acme", Account: "main"}

func key(id string) envelope.Key {
	return envelope.Key{Integration: "demo", Account: "main", EventID: id}
}

// publish puts a delivery on INTAKE_IN as ingress would. msgID overrides the
// dedup id, to land the same delivery twice in the stream (as a provider
// retry past the duplicate window does).
func (r *rig) publish(id, body, msgID string) {
	r.t.Helper()
	r.publishTyped(id, "thing.happened", body, msgID)
}

// publishTyped is publish of a delivery of event type typ; it returns the
// message's INTAKE_IN sequence.
func (r *rig) publishTyped(id, typ, body, msgID string) uint64 {
	r.t.Helper()
	msg := envelope.NewDelivery(key(id), "acme", typ, []byte(body), time.Now()).Msg()
	if msgID != "" {
		msg.Header.Set(envelope.HeaderMsgID, msgID)
	}
	ack, err := r.js.PublishMsg(context.Background(), msg)
	if err != nil {
		r.t.Fatal(err)
	}
	return ack.Sequence
}

// relayAfter is the rigs' default outbox.relay_after: rows pending this
// long are the relay's; until then they are the processor's to publish.
const relayAfter = 3 * time.Second

// run starts a processor and a relay; the returned stop cancels them and
// waits until both returned (a clean shutdown, or the "crash" of a test).
func (r *rig) run(o processor.Options) (stop func()) {
	r.t.Helper()
	return r.runWith(faults.Hooks{}, o)
}

// runWith is run with fault-injection hooks.
func (r *rig) runWith(hooks faults.Hooks, o processor.Options) (stop func()) {
	r.t.Helper()
	o.Store = r.store
	if o.JS == nil {
		o.JS = r.js
	}
	if o.Handler == nil {
		o.Handler = effects()
	}
	if o.Integrations == nil {
		o.Integrations = []config.Integration{demo}
	}
	if o.Config.AckWait == 0 {
		o.Config = config.Processor{AckWait: 2 * time.Second, MaxDeliver: 10, Concurrency: 2}
	}
	p, err := processor.New(o)
	if err != nil {
		r.t.Fatal(err)
	}
	after := relayAfter
	if r.relayAfter > 0 {
		after = r.relayAfter
	}
	// A test that keeps the relay out (relay_after of an hour) states a
	// window that allows it; the streams' own window does not matter then.
	relay := mustRelay(r.t, processor.RelayOptions{Store: r.store, JS: r.js, Metrics: o.Metrics,
		Config:          config.Outbox{PollInterval: 100 * time.Millisecond, BatchSize: 50, RelayAfter: after},
		DuplicateWindow: max(config.DefaultDuplicateWindow, 2*after)})
	ctx, cancel := context.WithCancel(faults.With(context.Background(), hooks))
	var wg sync.WaitGroup
	wg.Go(func() { _ = p.Run(ctx) })
	wg.Go(func() { _ = relay.Run(ctx) })
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	r.t.Cleanup(stop)
	return stop
}

func (r *rig) count(query string, args ...any) int {
	r.t.Helper()
	return r.tr.Count(r.t, query, args...)
}

// settled waits for want inbox rows and an empty outbox.
func (r *rig) settled(want int) {
	r.t.Helper()
	r.tr.Settled(r.t, want, 60*time.Second)
}

// outCount counts INTAKE_OUT messages per Intake-Key.
func (r *rig) outCount() map[string]int {
	r.t.Helper()
	return r.tr.CountBy(r.t, envelope.StreamOut, envelope.HeaderKey)
}

func TestCrashBetweenCommitAndAckChangesNothing(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	m := telemetry.NewMetrics()
	crashed := make(chan struct{})
	var crashedOnce sync.Once
	stopA := r.runWith(faults.Hooks{AfterCommit: func() error {
		crashedOnce.Do(func() { close(crashed) })
		return errors.New("simulated crash: the ack is never sent")
	}}, processor.Options{Metrics: m})
	r.publish("evt_crash", `{"n":1}`, "")
	<-crashed
	stopA()

	// A second processor gets the redelivery once the ack deadline passes.
	r.run(processor.Options{Metrics: m})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return testutil.ToFloat64(m.Processed.WithLabelValues("demo", "redelivered")) >= 1
	}, "the unacked message was never redelivered")
	r.settled(1)
	r.tr.CaughtUp(t, 30*time.Second)
	if n := testutil.ToFloat64(m.Processed.WithLabelValues("demo", "redelivered")); n != 1 {
		t.Fatalf("redelivered %v times, want once (the ack after the redelivery was lost too?)", n)
	}
	// The relay counts after its commit: wait for the count, then check it.
	testenv.Eventually(t, 30*time.Second, func() bool { return testutil.ToFloat64(m.OutboxRelayed) >= 1 },
		"the relay never published the crashed processor's row")

	if n := r.count(`SELECT count(*) FROM effects`); n != 1 {
		t.Fatalf("%d business effects, want 1", n)
	}
	if n := r.count(`SELECT delivery_count FROM intake.inbox`); n != 1 {
		t.Fatalf("delivery_count = %d, want 1 (a redelivery is not a new delivery)", n)
	}
	if out := r.outCount(); out[key("evt_crash").String()] != 1 || len(out) != 1 {
		t.Fatalf("INTAKE_OUT = %v, want one message", out)
	}
	// The crashed processor never published its committed row: the relay did.
	if n := testutil.ToFloat64(m.OutboxRelayed); n != 1 {
		t.Fatalf("relay published %v rows, want the crashed processor's 1", n)
	}
}

func TestTwoProcessorsRaceOnDuplicates(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	// 20 events, each in the stream 3 times (distinct message ids, as when
	// a provider retries past the duplicate window), consumed by two
	// processors at once.
	const events, copies = 20, 3
	for c := range copies {
		for i := range events {
			r.publish(fmt.Sprintf("evt_%d", i), fmt.Sprintf(`{"i":%d}`, i), fmt.Sprintf("copy-%d-%d", c, i))
		}
	}
	m := telemetry.NewMetrics()
	// The relay would take nothing within the test: settling (nothing
	// pending) shows the processors published and marked their own rows.
	r.relayAfter = time.Hour
	r.run(processor.Options{Metrics: m})
	r.run(processor.Options{Metrics: m})
	r.settled(events)
	// Every copy acknowledged: the outcome counts (taken before the acks)
	// are final.
	r.tr.CaughtUp(t, 60*time.Second)
	if n := testutil.ToFloat64(m.Processed.WithLabelValues("demo", "duplicate")); n != events*(copies-1) {
		t.Fatalf("%v copies seen as duplicates, want %d", n, events*(copies-1))
	}
	if n := testutil.ToFloat64(m.Processed.WithLabelValues("demo", "new")); n != events {
		t.Fatalf("%v events applied as new, want %d", n, events)
	}

	if n := r.count(`SELECT count(*) FROM effects`); n != events {
		t.Fatalf("%d business effects, want %d", n, events)
	}
	if n := r.count(`SELECT count(DISTINCT key) FROM effects`); n != events {
		t.Fatalf("%d distinct effects, want %d", n, events)
	}
	out := r.outCount()
	for i := range events {
		if got := out[key(fmt.Sprintf("evt_%d", i)).String()]; got != 1 {
			t.Fatalf("evt_%d has %d processed messages, want 1", i, got)
		}
	}
	if pub, rel := testutil.ToFloat64(m.OutboxPublished), testutil.ToFloat64(m.OutboxRelayed); pub != events || rel != 0 {
		t.Fatalf("published %v rows, %v of them by the relay; want %d by the processors", pub, rel, events)
	}
}

func TestPostgresRestartMidStream(t *testing.T) {
	t.Parallel()
	pg := testenv.PrivatePostgres(t)
	r := setup(t, pg.URL())
	var applied atomic.Int64
	restarted := make(chan struct{})
	h := effects()
	r.run(processor.Options{Handler: processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		applied.Add(1)
		return h.Handle(ctx, tx, ev)
	})})
	const events = 60
	for i := range events / 2 {
		r.publish(fmt.Sprintf("evt_%d", i), fmt.Sprintf(`{"i":%d}`, i), "")
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return applied.Load() > 0 }, "nothing applied")
	go func() {
		defer close(restarted)
		pg.Restart(t)
	}()
	for i := events / 2; i < events; i++ {
		r.publish(fmt.Sprintf("evt_%d", i), fmt.Sprintf(`{"i":%d}`, i), "")
	}
	<-restarted
	r.settled(events)
	if n := r.count(`SELECT count(*) FROM effects`); n != events {
		t.Fatalf("%d business effects after a Postgres restart, want %d", n, events)
	}
	if n := r.count(`SELECT count(DISTINCT key) FROM effects`); n != events {
		t.Fatalf("%d distinct effects, want %d", n, events)
	}
	out := r.outCount()
	if len(out) != events {
		t.Fatalf("INTAKE_OUT has %d keys, want %d", len(out), events)
	}
	for k, n := range out {
		if n != 1 {
			t.Fatalf("%s has %d processed messages", k, n)
		}
	}
}

func TestHandlerErrorRetriesThenFails(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	var calls atomic.Int64
	r.run(processor.Options{
		Config: config.Processor{AckWait: 2 * time.Second, MaxDeliver: 2, Concurrency: 1},
		Handler: processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
			calls.Add(1)
			if _, err := tx.Exec(ctx, `INSERT INTO effects (key) VALUES ($1)`, ev.Key.String()); err != nil {
				return nil, err
			}
			return nil, errors.New("partner API said no")
		}),
	})
	r.publish("evt_bad", `{}`, "")
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'failed'`) == 1
	}, "event never marked failed")
	var errText string
	var attempts int
	if err := r.db.QueryRow(context.Background(), `SELECT error, attempts FROM intake.inbox`).Scan(&errText, &attempts); err != nil {
		t.Fatal(err)
	}
	if errText != "partner API said no" || attempts != 2 || calls.Load() != 2 {
		t.Fatalf("failed row error=%q attempts=%d, handler calls=%d; want the error after 2 attempts", errText, attempts, calls.Load())
	}
	// The failed delivery is in the history like an applied one's, once
	// although the stream delivered it twice.
	if n := r.count(`SELECT count(*) FROM intake.deliveries WHERE receipt_id = $1`, envelope.StreamReceiptID(1)); n != 1 {
		t.Fatalf("failed event has %d history rows for its delivery, want 1", n)
	}
	if n := r.count(`SELECT delivery_count FROM intake.inbox`); n != 1 {
		t.Fatalf("failed event's delivery_count = %d, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM effects`); n != 0 {
		t.Fatalf("%d effects survived failed transactions", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.outbox`); n != 0 {
		t.Fatalf("%d outbox rows from a failed event", n)
	}
}

func TestPermanentErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	var calls atomic.Int64
	r.run(processor.Options{Handler: processor.HandlerFunc(func(context.Context, pgx.Tx, *processor.Event) ([]processor.Message, error) {
		calls.Add(1)
		return nil, processor.Permanent(errors.New("unknown product"))
	})})
	r.publish("evt_perm", `{}`, "")
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'failed'`) == 1
	}, "event never marked failed")
	if calls.Load() != 1 {
		t.Fatalf("handler called %d times for a permanent error, want 1", calls.Load())
	}
}

// replay records a replay of the stored message at seq, as the replayer
// records one (the processor applies only copies a recorded replay covers),
// republishes the message the way the replayer does and returns the
// replay's id.
func (r *rig) replay(seq uint64, mode inbox.ReplayMode) string {
	r.t.Helper()
	return r.replayWith(seq, store.Replay{Mode: string(mode)})
}

// replayWith is replay recording rep's mode and admit_replayed_bodies.
func (r *rig) replayWith(seq uint64, rep store.Replay) string {
	r.t.Helper()
	mode := inbox.ReplayMode(rep.Mode)
	ctx := context.Background()
	s, err := r.js.Stream(ctx, envelope.StreamIn)
	if err != nil {
		r.t.Fatal(err)
	}
	raw, err := s.GetMsg(ctx, seq)
	if err != nil {
		r.t.Fatal(err)
	}
	k, _ := envelope.ParseKey(raw.Header.Get(envelope.HeaderKey))
	replayID := store.NewID()
	msgID := "replay:" + replayID + ":" + k.String()
	if err := r.store.CreateReplay(ctx, &store.Replay{ID: replayID, RequestedBy: "test", Selector: []byte(`{}`),
		Mode: string(mode), Reason: "test", Rate: 10, State: store.ReplayRunning, Matched: 1, AdmitReplayedBodies: rep.AdmitReplayedBodies},
		[]store.ReplayItem{{Key: k, Tenant: raw.Header.Get(envelope.HeaderTenant), EventType: raw.Header.Get(envelope.HeaderEventType),
			StreamSeq: seq, MsgID: msgID, Outcome: "test"}}); err != nil {
		r.t.Fatal(err)
	}
	msg := &nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data}
	msg.Header.Set(envelope.HeaderMsgID, msgID)
	msg.Header.Set(envelope.HeaderReplayID, replayID)
	msg.Header.Set(envelope.HeaderReplayMode, string(mode))
	if _, err := r.js.PublishMsg(ctx, msg); err != nil {
		r.t.Fatal(err)
	}
	return replayID
}

func TestReplayModes(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	m := telemetry.NewMetrics()
	var broken atomic.Bool
	broken.Store(true)
	h := effects()
	r.run(processor.Options{Metrics: m, Handler: processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		if ev.Key.EventID == "evt_fails" && broken.Load() {
			return nil, processor.Permanent(errors.New("downstream schema mismatch"))
		}
		return h.Handle(ctx, tx, ev)
	})})
	r.publish("evt_ok", `{"ok":true}`, "")     // seq 1
	r.publish("evt_fails", `{"ok":false}`, "") // seq 2
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'failed'`) == 1 &&
			r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'processed'`) == 1
	}, "first pass never settled")

	// Exact replay of a processed event: the inbox decides, nothing applies.
	r.replay(1, inbox.ReplayExact)
	testenv.Eventually(t, 30*time.Second, func() bool {
		return testutil.ToFloat64(m.Processed.WithLabelValues("demo", "replayed")) >= 1
	}, "exact replay never processed")
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_ok").String()); n != 1 {
		t.Fatalf("exact replay of a processed event: %d effects, want 1", n)
	}

	// Exact replay of a failed event after the cause is fixed: applied once.
	broken.Store(false)
	r2 := r.replay(2, inbox.ReplayExact)
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'processed'`) == 2
	}, "failed event never retried")
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_fails").String()); n != 1 {
		t.Fatalf("retried event: %d effects, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.inbox WHERE event_id = 'evt_fails' AND error IS NULL`); n != 1 {
		t.Fatal("retried event kept its error")
	}

	// Re-execution: a second execution, linked to the replay.
	r3 := r.replay(1, inbox.ReplayReexecute)
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.executions WHERE event_id = 'evt_ok'`) == 2
	}, "re-execution never recorded")
	if n := r.count(`SELECT count(*) FROM intake.executions WHERE event_id = 'evt_ok' AND mode = 'reexecute' AND replay_id = $1`, r3); n != 1 {
		t.Fatal("re-execution not linked to its replay")
	}
	if n := r.count(`SELECT count(*) FROM intake.executions WHERE event_id = 'evt_fails' AND mode = 'retry' AND replay_id = $1`, r2); n != 1 {
		t.Fatal("retry execution not recorded")
	}
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_ok").String()); n != 2 {
		t.Fatalf("re-executed event: %d effects, want 2", n)
	}
	r.settled(2)
	r.tr.CaughtUp(t, 60*time.Second)
	if n := testutil.ToFloat64(m.Processed.WithLabelValues("demo", "replayed")); n != 1 {
		t.Fatalf("%v exact replays of a processed event counted, want 1", n)
	}
	if out := r.outCount(); out[key("evt_ok").String()] != 2 || out[key("evt_fails").String()] != 1 {
		t.Fatalf("INTAKE_OUT = %v, want 2 for the re-executed event and 1 for the retried one", out)
	}
}

func TestPoisonMessageInABatchFailsAlone(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	const events = 40
	for i := range events {
		r.publish(fmt.Sprintf("evt_%d", i), fmt.Sprintf(`{"i":%d}`, i), "")
	}
	h := effects()
	// Publish first, then start: the messages arrive as one batch.
	r.run(processor.Options{
		Config: config.Processor{AckWait: 5 * time.Second, MaxDeliver: 1, BatchSize: 64, BatchWait: 200 * time.Millisecond, Concurrency: 1},
		Handler: processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
			if ev.Key.EventID == "evt_17" {
				return nil, errors.New("poison")
			}
			return h.Handle(ctx, tx, ev)
		}),
	})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox`) == events
	}, "batch never settled")
	if n := r.count(`SELECT count(*) FROM effects`); n != events-1 {
		t.Fatalf("%d effects, want %d (all but the poison message)", n, events-1)
	}
	if n := r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'failed' AND event_id = 'evt_17'`); n != 1 {
		t.Fatal("poison message not marked failed")
	}
}

func TestStaleVersionsAreRecordedNotApplied(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	pub := func(id string, version int64) {
		d := envelope.NewDelivery(key(id), "acme", "customer.updated", []byte(`{"v":`+fmt.Sprint(version)+`}`), time.Now())
		d.ObjectID, d.ObjectVersion = "cus_1", version
		if _, err := r.js.PublishMsg(context.Background(), d.Msg()); err != nil {
			t.Fatal(err)
		}
	}
	stop := r.run(processor.Options{Config: config.Processor{AckWait: 2 * time.Second, MaxDeliver: 3, BatchSize: 1, Concurrency: 1}})
	pub("evt_v2", 2)
	r.settled(1)
	pub("evt_v1", 1) // arrives late, older
	pub("evt_v3", 3)
	pub("evt_v3b", 3) // an equal version applies (documented tie rule)
	r.settled(4)
	stop()
	if n := r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'stale' AND event_id = 'evt_v1'`); n != 1 {
		t.Fatal("older version not recorded as stale")
	}
	if n := r.count(`SELECT count(*) FROM effects`); n != 3 {
		t.Fatalf("%d effects, want 3 (v2, v3, v3b; not the stale v1)", n)
	}
	if n := r.count(`SELECT version FROM intake.object_versions WHERE object_id = 'cus_1'`); n != 3 {
		t.Fatalf("stored version %d, want 3", n)
	}
}

func TestCrashBetweenFetchAndCommitLosesNothing(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	// Processor A has its own connection; it "dies" inside the handler: the
	// connection drops (no ack or nak can leave) and the transaction never
	// commits.
	ncA, err := nats.Connect(r.nats.URL())
	if err != nil {
		t.Fatal(err)
	}
	jsA, _ := jetstream.New(ncA)
	var died atomic.Bool
	h := effects()
	stopA := r.run(processor.Options{JS: jsA, Handler: processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		if died.CompareAndSwap(false, true) {
			ncA.Close()
			return nil, errors.New("process killed")
		}
		return h.Handle(ctx, tx, ev)
	})})
	r.publish("evt_fetch", `{}`, "")
	testenv.Eventually(t, 30*time.Second, died.Load, "processor A never fetched")
	stopA()
	if n := r.count(`SELECT count(*) FROM intake.inbox`); n != 0 {
		t.Fatalf("%d inbox rows committed by a processor that died before commit", n)
	}
	r.run(processor.Options{})
	r.settled(1)
	if n := r.count(`SELECT count(*) FROM effects`); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	if out := r.outCount(); out[key("evt_fetch").String()] != 1 {
		t.Fatalf("INTAKE_OUT = %v", out)
	}
}

func TestNATSRestartMidStream(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	const events = 100
	for i := range events / 2 {
		r.publish(fmt.Sprintf("evt_%d", i), fmt.Sprintf(`{"i":%d}`, i), "")
	}
	r.run(processor.Options{})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox`) > 0
	}, "nothing processed before the restart")
	r.nats.Restart(t)
	for i := events / 2; i < events; i++ {
		msg := envelope.NewDelivery(key(fmt.Sprintf("evt_%d", i)), "acme", "thing.happened", []byte(fmt.Sprintf(`{"i":%d}`, i)), time.Now()).Msg()
		testenv.Eventually(t, 30*time.Second, func() bool {
			_, err := r.js.PublishMsg(context.Background(), msg)
			return err == nil
		}, "publish after the NATS restart never succeeded")
	}
	r.settled(events)
	if n := r.count(`SELECT count(DISTINCT key) FROM effects`); n != events {
		t.Fatalf("%d distinct effects, want %d", n, events)
	}
	if n := r.count(`SELECT count(*) FROM effects`); n != events {
		t.Fatalf("%d effects, want %d", n, events)
	}
	out := r.outCount()
	for i := range events {
		if n := out[key(fmt.Sprintf("evt_%d", i)).String()]; n != 1 {
			t.Fatalf("evt_%d: %d processed messages, want 1", i, n)
		}
	}
}

func TestShutdownDrainsFetchedWork(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	const events = 200
	for i := range events {
		r.publish(fmt.Sprintf("evt_%d", i), `{}`, "")
	}
	stop := r.run(processor.Options{Config: config.Processor{AckWait: 30 * time.Second, MaxDeliver: 10, BatchSize: 50, BatchWait: 50 * time.Millisecond, Concurrency: 2}})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox`) > 0
	}, "nothing processed")
	stop() // returns after in-flight batches committed, acked and published
	done := r.count(`SELECT count(*) FROM intake.inbox`)
	if n := r.count(`SELECT count(*) FROM intake.outbox_pending`); n != 0 {
		t.Fatalf("%d outbox rows left pending after a clean shutdown, want 0", n)
	}
	// Every committed event was acked: a new processor has exactly the rest
	// to do, immediately (no ack deadline to wait out), and applies nothing twice.
	m := telemetry.NewMetrics()
	r.run(processor.Options{Metrics: m, Config: config.Processor{AckWait: 30 * time.Second, MaxDeliver: 10, BatchSize: 50, BatchWait: 50 * time.Millisecond, Concurrency: 2}})
	r.settled(events)
	r.tr.CaughtUp(t, 60*time.Second)
	if got := testutil.ToFloat64(m.Processed.WithLabelValues("demo", "redelivered")); got != 0 {
		t.Fatalf("%v committed messages came back after a clean shutdown (%d were done)", got, done)
	}
	if n := r.count(`SELECT count(*) FROM effects`); n != events {
		t.Fatalf("%d effects, want %d", n, events)
	}
}

func TestHandlerPanicIsRetriedThenFailed(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	var calls atomic.Int64
	r.run(processor.Options{
		Config: config.Processor{AckWait: 2 * time.Second, MaxDeliver: 2, Concurrency: 1, Backoff: []time.Duration{100 * time.Millisecond}},
		Handler: processor.HandlerFunc(func(context.Context, pgx.Tx, *processor.Event) ([]processor.Message, error) {
			calls.Add(1)
			var m map[string]int
			m["boom"]++ // a nil map write: a real panic, not a returned error
			return nil, nil
		}),
	})
	r.publish("evt_panic", `{}`, "")
	r.publish("evt_fine_too", `{}`, "") // shares the batch; must not be held hostage
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'failed'`) == 2
	}, "panicking events never marked failed")
	var errText string
	if err := r.db.QueryRow(context.Background(), `SELECT error FROM intake.inbox WHERE event_id = 'evt_panic'`).Scan(&errText); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errText, "handler panic") || !strings.Contains(errText, "assignment to entry in nil map") {
		t.Fatalf("failed row error %q does not carry the panic", errText)
	}
	if calls.Load() < 4 {
		t.Fatalf("handler ran %d times, want each event retried up to max_deliver", calls.Load())
	}
	if n := r.count(`SELECT count(*) FROM intake.outbox`); n != 0 {
		t.Fatalf("%d outbox rows from panicking handlers", n)
	}
}

func TestQueuedStatementsCommitWithTheBatchAndIsolateAPoisonOne(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	if _, err := r.db.Exec(context.Background(), `ALTER TABLE effects ADD CONSTRAINT no_poison CHECK (key NOT LIKE '%evt_poison%')`); err != nil {
		t.Fatal(err)
	}
	const events = 30
	for i := range events {
		r.publish(fmt.Sprintf("evt_%d", i), `{}`, "")
	}
	r.publish("evt_poison", `{}`, "")
	r.run(processor.Options{
		Config:  config.Processor{AckWait: 5 * time.Second, MaxDeliver: 1, BatchSize: 64, BatchWait: 200 * time.Millisecond, Concurrency: 1},
		Handler: queuedEffects(),
	})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox`) == events+1
	}, "batch never settled")
	if n := r.count(`SELECT count(*) FROM effects`); n != events {
		t.Fatalf("%d effects, want %d", n, events)
	}
	var errText string
	if err := r.db.QueryRow(context.Background(), `SELECT error FROM intake.inbox WHERE event_id = 'evt_poison' AND status = 'failed'`).Scan(&errText); err != nil {
		t.Fatalf("poison event not failed: %v", err)
	}
	if !strings.Contains(errText, "no_poison") {
		t.Fatalf("failed row error %q does not name the violated constraint", errText)
	}
}

func mustRelay(t testing.TB, o processor.RelayOptions) *processor.Relay {
	t.Helper()
	r, err := processor.NewRelay(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestTwoReplaysOfAFailedEventInOneBatchApplyItOnce: the first copy settles
// the row, so the second, decided in the same transaction, deduplicates.
func TestTwoReplaysOfAFailedEventInOneBatchApplyItOnce(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	m := telemetry.NewMetrics()
	var broken atomic.Bool
	broken.Store(true)
	h := effects()
	handler := processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		if broken.Load() {
			return nil, processor.Permanent(errors.New("downstream schema mismatch"))
		}
		return h.Handle(ctx, tx, ev)
	})
	stop := r.run(processor.Options{Metrics: m, Handler: handler})
	r.publish("evt_twice", `{"n":1}`, "") // seq 1
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'failed'`) == 1
	}, "the event never failed")
	stop()

	// Two operators replay it while no processor runs: both copies are in
	// the stream when the next processor starts, and arrive as one batch.
	broken.Store(false)
	r.replay(1, inbox.ReplayExact)
	r.replay(1, inbox.ReplayExact)
	r.run(processor.Options{Metrics: m, Handler: handler})
	r.tr.CaughtUp(t, 30*time.Second)
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_twice").String()); n != 1 {
		t.Fatalf("%d business effects, want 1", n)
	}
	retried := testutil.ToFloat64(m.Processed.WithLabelValues("demo", "retried"))
	replayed := testutil.ToFloat64(m.Processed.WithLabelValues("demo", "replayed"))
	if retried != 1 || replayed != 1 {
		t.Fatalf("retried %v, replayed %v; want one of each", retried, replayed)
	}
}

// TestReexecutionRedeliveredAfterItsCommitRunsOnce: a re-execution copy
// whose processor dies between commit and ack comes back; the execution it
// committed says it ran, so it does not run again.
func TestReexecutionRedeliveredAfterItsCommitRunsOnce(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	m := telemetry.NewMetrics()
	stop := r.run(processor.Options{Metrics: m})
	r.publish("evt_rerun", `{"n":1}`, "") // seq 1
	r.settled(1)
	stop()

	crashed := make(chan struct{})
	var once sync.Once
	stopA := r.runWith(faults.Hooks{AfterCommit: func() error {
		once.Do(func() { close(crashed) })
		return errors.New("simulated crash: the ack is never sent")
	}}, processor.Options{Metrics: m})
	r.replay(1, inbox.ReplayReexecute)
	<-crashed
	stopA()

	r.run(processor.Options{Metrics: m})
	r.tr.CaughtUp(t, 30*time.Second) // the copy came back after the ack deadline and was acked
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_rerun").String()); n != 2 {
		t.Fatalf("%d business effects, want 2 (the original and one re-execution)", n)
	}
	if n := testutil.ToFloat64(m.Processed.WithLabelValues("demo", "redelivered")); n != 1 {
		t.Fatalf("redelivered %v, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.executions WHERE event_id = 'evt_rerun' AND mode = 'reexecute'`); n != 1 {
		t.Fatalf("%d re-executions recorded, want 1", n)
	}
}

// TestStartedProcessorExportsAlertSeriesAtZero: the series the alerts take
// an increase() of exist at 0 for every configured integration before
// anything happened, so the first conflict, late failure or commit is an
// increase of 1 (a series that first appears at 1 increases by 0).
func TestStartedProcessorExportsAlertSeriesAtZero(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	m := telemetry.NewMetricsFor(telemetry.Roles{Processor: true})
	other := config.Integration{Name: "other", Tenant: "acme", Account: "main"}
	r.run(processor.Options{Metrics: m, Integrations: []config.Integration{demo, other}})
	// Gathered before any WithLabelValues here, which would create them.
	const want = `
# HELP intake_processor_conflicts_total Same-id-different-payload deliveries recorded.
# TYPE intake_processor_conflicts_total counter
intake_processor_conflicts_total{integration="demo"} 0
intake_processor_conflicts_total{integration="other"} 0
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "intake_processor_conflicts_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.FailureDelivery); n != 2 {
		t.Errorf("%d intake_processor_failure_delivery series, want 2 (one per integration)", n)
	}
	if n := testutil.CollectAndCount(m.Processed); n != 2 {
		t.Errorf("%d intake_processor_messages_total series, want 2 (outcome new, one per integration)", n)
	}
	for _, name := range []string{"demo", "other"} {
		var d dto.Metric
		if err := m.FailureDelivery.WithLabelValues(name).(prometheus.Metric).Write(&d); err != nil {
			t.Fatal(err)
		}
		if n := d.GetHistogram().GetSampleCount(); n != 0 {
			t.Errorf("intake_processor_failure_delivery_count{integration=%q} = %d, want 0", name, n)
		}
		if n := testutil.ToFloat64(m.Processed.WithLabelValues(name, "new")); n != 0 {
			t.Errorf("intake_processor_messages_total{integration=%q,outcome=\"new\"} = %v, want 0", name, n)
		}
	}
}

// Forward's row keeps its event's INTAKE_IN sequence, not a copy of the
// body (OutboxPayloadCopy: a copy); a processor that dies after its commit
// leaves the row to the relay, which reads the body back from the stream.
// A row whose message is gone, or is another event's, is not published:
// it stays pending with the reason.
func TestRelayReadsAPayloadLeftInTheStream(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	ctx := context.Background()
	m := telemetry.NewMetrics()
	crashed := make(chan struct{})
	var crashedOnce sync.Once
	stop := r.runWith(faults.Hooks{AfterCommit: func() error {
		crashedOnce.Do(func() { close(crashed) })
		return errors.New("simulated crash: nothing published, nothing acked")
	}}, processor.Options{Metrics: m})
	body := `{"left":"in the stream"}`
	seq := r.publishTyped("evt_ref", "ref.made", body, "")
	<-crashed
	stop()
	var stored []byte
	var storedSeq *int64
	if err := r.db.QueryRow(ctx, `SELECT payload, payload_seq FROM intake.outbox WHERE event_id = 'evt_ref'`).Scan(&stored, &storedSeq); err != nil {
		t.Fatal(err)
	}
	if stored != nil || storedSeq == nil || uint64(*storedSeq) != seq {
		t.Fatalf("outbox row: payload %q, payload_seq %v; want NULL and %d", stored, storedSeq, seq)
	}

	// Two rows no stream message backs: a sequence past the stream's end,
	// and the sequence of another event's message.
	other := r.publishTyped("evt_other", "thing.happened", `{"other":1}`, "")
	w := store.BatchWrites{Outbox: []store.OutboxRow{
		{Key: key("evt_nowhere"), Subject: "intake.out.acme.demo.thing_happened", PayloadSeq: 1 << 40},
		{Key: key("evt_mixed_up"), Subject: "intake.out.acme.demo.thing_happened", PayloadSeq: other},
	}}
	if err := pgx.BeginFunc(ctx, r.db, func(tx pgx.Tx) error { return w.Flush(ctx, tx) }); err != nil {
		t.Fatal(err)
	}

	r.run(processor.Options{Metrics: m})
	testenv.Eventually(t, 30*time.Second, func() bool { return testutil.ToFloat64(m.OutboxRelayed) >= 1 },
		"the relay never published the crashed processor's row")
	out, err := r.js.Stream(ctx, envelope.StreamOut)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := out.GetLastMsgForSubject(ctx, envelope.SubjectOut("acme", "demo", "ref.made"))
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Data) != body || msg.Header.Get(envelope.HeaderKey) != key("evt_ref").String() {
		t.Fatalf("INTAKE_OUT got %q for %s; want the event's body %q", msg.Data, msg.Header.Get(envelope.HeaderKey), body)
	}
	// The row stored neither the key's headers nor the payload hash; the
	// relay's copy carries them, and the headers a processor publishes
	// itself (evt_other's message, published by this run).
	var storedHeaders map[string][]string
	if err := r.db.QueryRow(ctx, `SELECT headers FROM intake.outbox WHERE event_id = 'evt_ref'`).Scan(&storedHeaders); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{envelope.HeaderKey, envelope.HeaderIntegration, envelope.HeaderAccount, envelope.HeaderEventID, envelope.HeaderPayloadSHA256} {
		if _, ok := storedHeaders[h]; ok {
			t.Errorf("the outbox row stores %s, which it gives back: %v", h, storedHeaders)
		}
	}
	for h, want := range map[string]string{envelope.HeaderKey: key("evt_ref").String(), envelope.HeaderIntegration: "demo",
		envelope.HeaderAccount: "main", envelope.HeaderEventID: "evt_ref", envelope.HeaderTenant: "acme",
		envelope.HeaderEventType: "ref.made", envelope.HeaderPayloadSHA256: envelope.PayloadSHA256([]byte(body))} {
		if got := msg.Header.Get(h); got != want {
			t.Errorf("the relay's copy has %s %q; want %q", h, got, want)
		}
	}
	var direct *jetstream.RawStreamMsg
	testenv.Eventually(t, 30*time.Second, func() bool {
		direct, err = out.GetLastMsgForSubject(ctx, envelope.SubjectOut("acme", "demo", "thing.happened"))
		return err == nil
	}, "evt_other was never published")
	if got, want := headerNames(msg.Header), headerNames(direct.Header); !slices.Equal(got, want) {
		t.Errorf("the relay's copy has headers %v; a processor's own publish %v", got, want)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.outbox WHERE last_error LIKE '%payload not in INTAKE_IN%'`) == 2 &&
			testutil.ToFloat64(m.OutboxPayloadGone) >= 2
	}, "the rows without a stream message were not put back with the reason, and counted")
	if n := r.count(`SELECT count(*) FROM intake.outbox_pending p JOIN intake.outbox o USING (id)
		WHERE o.event_id IN ('evt_nowhere', 'evt_mixed_up')`); n != 2 {
		t.Fatalf("%d of the 2 rows without a stream message are pending, want both", n)
	}
	if outs := r.outCount(); outs[key("evt_nowhere").String()] != 0 || outs[key("evt_mixed_up").String()] != 0 {
		t.Fatalf("INTAKE_OUT = %v: a row without its stream message was published", outs)
	}
}

// A handler that forwards the event's body under a payload hash of its
// own keeps a copy of the body and its header in the row: the row would
// otherwise give back INTAKE_IN's hash in place of the handler's.
func TestHandlersOwnPayloadHashIsKept(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	fwd := processor.Forward()
	r.run(processor.Options{Handler: processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		msgs, err := fwd.Handle(ctx, tx, ev)
		for i := range msgs {
			msgs[i].Header = maps.Clone(msgs[i].Header)
			msgs[i].Header[envelope.HeaderPayloadSHA256] = []string{"the-handlers-own"}
		}
		return msgs, err
	})})
	r.publish("evt_own_hash", `{"own":"hash"}`, "")
	r.settled(1)
	var stored []byte
	var storedSeq *int64
	var headers map[string][]string
	if err := r.db.QueryRow(context.Background(), `SELECT payload, payload_seq, headers FROM intake.outbox WHERE event_id = 'evt_own_hash'`).
		Scan(&stored, &storedSeq, &headers); err != nil {
		t.Fatal(err)
	}
	if string(stored) != `{"own":"hash"}` || storedSeq != nil || !slices.Equal(headers[envelope.HeaderPayloadSHA256], []string{"the-handlers-own"}) {
		t.Fatalf("outbox row: payload %q, payload_seq %v, hash header %v; want the body, NULL and the handler's",
			stored, storedSeq, headers[envelope.HeaderPayloadSHA256])
	}
}

// OutboxPayloadCopy (the app sets it when INTAKE_IN keeps messages for
// less than outbox.retention): the row holds the body.
func TestOutboxPayloadCopy(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	r.run(processor.Options{OutboxPayloadCopy: true})
	r.publish("evt_copy", `{"copied":true}`, "")
	r.settled(1)
	var stored []byte
	var storedSeq *int64
	if err := r.db.QueryRow(context.Background(), `SELECT payload, payload_seq FROM intake.outbox WHERE event_id = 'evt_copy'`).Scan(&stored, &storedSeq); err != nil {
		t.Fatal(err)
	}
	if string(stored) != `{"copied":true}` || storedSeq != nil {
		t.Fatalf("outbox row: payload %q, payload_seq %v; want the body and NULL", stored, storedSeq)
	}
}

// headerNames is h's names, sorted.
func headerNames(h nats.Header) []string {
	names := slices.Collect(maps.Keys(h))
	slices.Sort(names)
	return names
}
