package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

// waitingBatches is a handler whose every batch waits d inside its
// transaction, as one remote call per batch (or a slow database) would,
// then writes one business row per event. The wait, not the CPU, sets the
// pace: a test can compare processor counts on any number of cores.
func waitingBatches(d time.Duration) processor.Handler {
	var seen sync.Map // transactions that have waited
	return processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		if _, waited := seen.LoadOrStore(tx, true); !waited {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO effects (key) VALUES ($1)`, ev.Key.String())
		return nil, err
	})
}

// scaleRun is one measurement: a backlog, some processors, the rate.
type scaleRun struct {
	processors int
	cfg        config.Processor
}

// committedRate publishes events to a fresh rig, starts run.processors
// processors (each with its own pool, as replicas have) and returns the
// committed rate in events/s from the first commit to the last, so that
// starting the processors is not counted. It checks exactly once: one
// inbox row and one business row per event, every message acked.
func committedRate(t *testing.T, events int, h processor.Handler, run scaleRun) float64 {
	t.Helper()
	r := setup(t, "")
	for i := range events {
		r.publish(fmt.Sprintf("evt_%d", i), fmt.Sprintf(`{"i":%d}`, i), "")
	}
	m := telemetry.NewMetrics()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range run.processors {
		p, err := processor.New(processor.Options{Store: testrig.Store(t, r.dbURL, 4), JS: r.js, Config: run.cfg,
			Integrations: []config.Integration{demo}, Handler: h, Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = p.Run(ctx) })
	}

	var first time.Time
	var atFirst, n int
	deadline := time.Now().Add(2 * time.Minute)
	for n < events {
		if time.Now().After(deadline) {
			t.Fatalf("%d processors committed %d of %d events in 2 minutes", run.processors, n, events)
		}
		time.Sleep(10 * time.Millisecond)
		n = r.count(`SELECT count(*) FROM intake.inbox`)
		if n > 0 && first.IsZero() {
			first, atFirst = time.Now(), n
		}
	}
	rate := float64(events-atFirst) / time.Since(first).Seconds()

	r.tr.CaughtUp(t, 30*time.Second)
	if got := r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'processed'`); got != events {
		t.Errorf("%d processors: %d processed inbox rows, want %d", run.processors, got, events)
	}
	if got, distinct := r.count(`SELECT count(*) FROM effects`), r.count(`SELECT count(DISTINCT key) FROM effects`); got != events || distinct != events {
		t.Errorf("%d processors: %d business rows for %d keys, want %d of each", run.processors, got, distinct, events)
	}
	if got := testutil.ToFloat64(m.Processed.WithLabelValues("demo", "new")); got != float64(events) {
		t.Errorf("%d processors applied %v events as new, want %d", run.processors, got, events)
	}
	return rate
}

// TestReplicasAddThroughputWhenBatchesWait is issue 21's scale-out test: when
// a batch's time is spent waiting, not computing, four processors sharing
// the consumer commit at least three times the rate of one, exactly once —
// when the window (processor.max_ack_pending) is sized for four. With the
// window one processor needs, four do not reach that: the window, not
// the processors, is the limit.
func TestReplicasAddThroughputWhenBatchesWait(t *testing.T) {
	if testing.Short() {
		t.Skip("measures three drains of a backlog (about 15s)")
	}
	t.Parallel()
	// 60 rounds of one processor's two batches of 10: 12s for one
	// processor, 3s for four.
	const wait, events = 200 * time.Millisecond, 1200
	base := config.Processor{AckWait: 10 * time.Second, MaxDeliver: 10, BatchSize: 10, Concurrency: 2}
	sized := func(replicas int) config.Processor { c := base; c.Replicas = replicas; return c }

	// The three drains run at the same time, so that whatever else loads
	// the machine loads them alike.
	var one, four, capped float64
	t.Run("drains", func(t *testing.T) {
		measure := func(name string, rate *float64, run scaleRun) {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				*rate = committedRate(t, events, waitingBatches(wait), run)
			})
		}
		measure("1 processor", &one, scaleRun{processors: 1, cfg: sized(1)})
		measure("4 processors", &four, scaleRun{processors: 4, cfg: sized(4)})
		measure("4 processors, window for 1", &capped, scaleRun{processors: 4, cfg: sized(1)})
	})
	if t.Failed() {
		return
	}
	t.Logf("committed events/s: 1 processor %.0f; 4 processors %.0f (%.2f×); 4 processors in a window for 1 (%d): %.0f (%.2f×)",
		one, four, four/one, sized(1).WithDefaults().MaxAckPending, capped, capped/one)
	if four < 3*one {
		t.Errorf("4 processors committed %.0f events/s, under 3× one processor's %.0f", four, one)
	}
	// At most 50 messages in flight: 5 batches of 10 against one
	// processor's 2 per wait, 2.5× at the very best.
	if capped >= 3*one {
		t.Errorf("4 processors in a window for one committed %.0f events/s, 3× one processor's %.0f: the window does not bound them", capped, one)
	}
}

// TestAWindowSmallerThanOneProcessorsBatchesRefusesToStart: a window that
// cannot hold one processor's batches is a start error naming the keys, not
// a processor that stalls.
func TestAWindowSmallerThanOneProcessorsBatchesRefusesToStart(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	_, err := processor.New(processor.Options{Store: r.store, JS: r.js,
		Config: config.Processor{BatchSize: 100, Concurrency: 4, MaxAckPending: 300}})
	if err == nil {
		t.Fatal("processor.New accepted a window of 300 under 4 batches of 100")
	}
	for _, want := range []string{"processor.max_ack_pending", "processor.batch_size × processor.concurrency (100 × 4 = 400)", "got 300"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestAFullWindowIsReported: processors waiting on a full window say so,
// in a metric and a log line, while messages wait in the stream.
func TestAFullWindowIsReported(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	const events = 100
	for i := range events {
		r.publish(fmt.Sprintf("evt_%d", i), fmt.Sprintf(`{"i":%d}`, i), "")
	}
	// Every batch waits for release: the window (exactly one processor's
	// batches) fills and stays full.
	release := make(chan struct{})
	h := processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		_, err := tx.Exec(ctx, `INSERT INTO effects (key) VALUES ($1)`, ev.Key.String())
		return nil, err
	})
	var logs testenv.Buffer
	m := telemetry.NewMetrics()
	r.run(processor.Options{Handler: h, Metrics: m, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Config: config.Processor{AckWait: 30 * time.Second, MaxDeliver: 10, BatchSize: 10, Concurrency: 2, MaxAckPending: 20}})

	testenv.Eventually(t, 30*time.Second, func() bool { return testutil.ToFloat64(m.WindowFull) >= 1 },
		"a full window was never counted")
	if l := logs.String(); strings.Count(l, "in-flight window is full") != 1 || !strings.Contains(l, "max_ack_pending=20") {
		t.Errorf("want one log line about the full window, naming it:\n%s", l)
	}
	if got, window := testutil.ToFloat64(m.AckPending), testutil.ToFloat64(m.MaxAckPending); got != 20 || window != 20 {
		t.Errorf("ack_pending %v of max_ack_pending %v, want 20 of 20", got, window)
	}
	close(release)
	r.settled(events)
	if n := r.count(`SELECT count(DISTINCT key) FROM effects`); n != events {
		t.Fatalf("%d business rows, want %d", n, events)
	}
}
