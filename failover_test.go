package intake_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/processor"
)

// TestAProcessorOnAStandbyWaitsForPromotion: the processor's DSN reaches a
// standby (a failover's new primary before its promotion). Writes fail as
// read-only: the processor holds its batches, deadlines extended, and
// /readyz says why; no delivery is used up and nothing is recorded as
// failed. Once the standby is promoted every event is processed, each
// delivered once.
func TestAProcessorOnAStandbyWaitsForPromotion(t *testing.T) {
	t.Parallel()
	waitForPromotion(t, 20, nil)
}

// A backlog larger than the batches in flight (batch_size × concurrency)
// waits out the standby too: what nats.go prefetched beyond the workers'
// batches is kept in progress by the collector, which stops pulling, so
// nothing is redelivered for the outage and each event is delivered once.
func TestABacklogOnAStandbyUsesUpNoDelivery(t *testing.T) {
	t.Parallel()
	waitForPromotion(t, 40, func(cfg *config.Config) {
		cfg.Processor.BatchSize, cfg.Processor.Concurrency = 4, 2
	})
}

// waitForPromotion runs a processor against a standby with events
// published, holds it there through several ack waits, promotes the
// standby and checks every event was processed once, delivered once. edit,
// if set, changes the configuration (ack_wait 2s).
func waitForPromotion(t *testing.T, events int, edit func(*config.Config)) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	primary := testenv.PrivatePostgres(t)
	testrig.Migrate(t, primary.URL())
	standby := primary.StartStandby(t, "standby") // a clone: migrated too

	n := testenv.NATS(t)
	cfg := testrig.ParseConfig(t, testConfig) // ack_wait 2s
	cfg.NATS.URL, cfg.Postgres.URL = n.URL(), standby.URL("intake")
	if edit != nil {
		edit(cfg)
	}
	backlog := events > cfg.Processor.WithDefaults().BatchSize*cfg.Processor.WithDefaults().Concurrency
	if err := stream.Setup(ctx, cfg.NATS, nil); err != nil { // as `intake migrate` does
		t.Fatal(err)
	}
	var maxDelivery atomic.Uint64
	fwd := processor.Forward()
	handler := processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		for {
			if d := maxDelivery.Load(); ev.Delivery <= d || maxDelivery.CompareAndSwap(d, ev.Delivery) {
				break
			}
		}
		return fwd.Handle(ctx, tx, ev)
	})
	a := testrig.StartApp(t, cfg, intake.Options{Roles: intake.Roles{Processor: true, Replayer: true}, Handler: handler})

	_, js := testrig.Connect(t, n.URL())
	for i := range events {
		k := envelope.Key{Integration: "demo", Account: "main", EventID: fmt.Sprintf("evt_%d", i)}
		msg := envelope.NewDelivery(k, "acme", "invoice.paid", demoBody(k.EventID, "hi"), time.Now()).Msg()
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	consumer := func() *jetstream.ConsumerInfo {
		t.Helper()
		c, err := js.Consumer(ctx, envelope.StreamIn, envelope.ConsumerName)
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}

	code, body := get(t, a.URL+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "postgres: read-only (a standby or in recovery)") {
		t.Errorf("/readyz on a standby = %d %q, want 503 saying postgres is read-only", code, body)
	}
	// Held through several ack waits: without the deadlines extended, or
	// with the batch failed as the messages' fault, JetStream would have
	// redelivered them by now.
	dbFailures := a.Metrics.Failures.WithLabelValues("", "db", "")
	heldUntil := time.Now().Add(3 * cfg.Processor.AckWait)
	testenv.Eventually(t, time.Minute, func() bool {
		return testutil.ToFloat64(dbFailures) >= 12 && time.Now().After(heldUntil)
	}, "the processor never retried its batch on the standby")
	// Without a backlog every event is held; with one, the processor
	// stopped pulling and the rest waits in the stream, not delivered.
	info := consumer()
	if held := info.NumAckPending; held == 0 || held > events || (!backlog && held != events) || info.NumRedelivered != 0 {
		t.Fatalf("while held: %d messages pending ack, %d redelivered; want %d (with a backlog, at least one) and 0",
			info.NumAckPending, info.NumRedelivered, events)
	}
	if backlog && info.Delivered.Consumer >= uint64(events) {
		t.Fatalf("while held: %d of %d messages delivered; want the pull stopped before the backlog", info.Delivered.Consumer, events)
	}

	primary.Kill(t)
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, standby.URL("intake"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	testenv.Eventually(t, time.Minute, func() bool {
		var processed int
		err := db.QueryRow(ctx, `SELECT count(*) FROM intake.inbox WHERE status = 'processed'`).Scan(&processed)
		return err == nil && processed == events
	}, "the events were never processed after the promotion")
	testenv.Eventually(t, 30*time.Second, func() bool { return consumer().NumAckPending == 0 },
		"the processor never acked its batches")

	var failed, counted int
	if err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status <> 'processed'), count(*) FILTER (WHERE delivery_count = 1)
		FROM intake.inbox`).Scan(&failed, &counted); err != nil {
		t.Fatal(err)
	}
	if failed != 0 || counted != events {
		t.Errorf("inbox: %d rows not processed, %d of %d with delivery_count 1", failed, counted, events)
	}
	if info := consumer(); info.Delivered.Consumer != uint64(events) || info.NumRedelivered != 0 || maxDelivery.Load() != 1 {
		t.Errorf("JetStream delivered %d times for %d messages, handler saw delivery %d; want each delivered once",
			info.Delivered.Consumer, events, maxDelivery.Load())
	}
	testenv.Eventually(t, 30*time.Second, func() bool { code, _ := get(t, a.URL+"/readyz"); return code == http.StatusOK },
		"/readyz never became ready after the promotion")
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
