package processor_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

// setReadOnly turns the whole server at url read-only (as an old primary
// back after a failover) or writable again, and returns once new sessions
// see it. It does not fail the test itself: handlers call it.
func setReadOnly(url string, on bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	value := map[bool]string{true: "on", false: "off"}[on]
	for _, sql := range []string{`SET default_transaction_read_only = off`,
		`ALTER SYSTEM SET default_transaction_read_only = ` + value, `SELECT pg_reload_conf()`} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
	}
	for {
		fresh, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		var got string
		err = fresh.QueryRow(ctx, `SHOW default_transaction_read_only`).Scan(&got)
		fresh.Close(context.Background())
		if err != nil || got == value {
			return err
		}
		if err := backoff.Sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("default_transaction_read_only never became %s: %w", value, err)
		}
	}
}

// A handler fails for good just as the database turns read-only: recording
// the failure waits for the database, its message held (no nak, no delivery
// used up), and the failed row is written once it takes writes again.
func TestRecordingAFailureWaitsForAWritableDatabase(t *testing.T) {
	t.Parallel()
	pg := testenv.PrivatePostgres(t)
	r := setup(t, pg.URL())
	var calls atomic.Int64
	m := telemetry.NewMetrics()
	r.run(processor.Options{
		Config:  config.Processor{AckWait: 2 * time.Second, MaxDeliver: 5, Concurrency: 1},
		Metrics: m,
		Handler: processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
			if calls.Add(1) == 1 {
				if err := setReadOnly(pg.URL(), true); err != nil {
					t.Error(err)
				}
			}
			return nil, processor.Permanent(errors.New("no such customer"))
		}),
	})
	r.publish("evt_x", `{}`, "")

	// Held through several ack waits.
	testenv.Eventually(t, time.Minute, func() bool { return testutil.ToFloat64(m.Failures.WithLabelValues("", "db", "")) >= 8 },
		"recording the failure was never retried")
	ctx := context.Background()
	c, err := r.js.Consumer(ctx, envelope.StreamIn, envelope.ConsumerName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 1 || info.NumRedelivered != 0 || r.count(`SELECT count(*) FROM intake.inbox`) != 0 {
		t.Fatalf("while read-only: %d pending ack, %d redelivered, %d inbox rows; want the message held, not redelivered, no row",
			info.NumAckPending, info.NumRedelivered, r.count(`SELECT count(*) FROM intake.inbox`))
	}

	if err := setReadOnly(pg.URL(), false); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'failed'`) == 1
	}, "the failure was never recorded")
	var attempts, deliveries int
	if err := r.db.QueryRow(ctx, `SELECT attempts, delivery_count FROM intake.inbox`).Scan(&attempts, &deliveries); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || deliveries != 1 || calls.Load() != 1 {
		t.Errorf("failed row: attempts %d, delivery_count %d, handler calls %d; want 1, 1, 1", attempts, deliveries, calls.Load())
	}
}

// A backlog larger than the batches in flight waits out a read-only
// database without a redelivery: the batches the workers hold and the one
// the collector formed are kept in progress, the collector stops pulling
// and keeps what nats.go had prefetched in progress too, and pulls again
// once the database takes writes. Every event is applied once, each message
// delivered once.
func TestABacklogWaitsOutAReadOnlyDatabaseWithoutRedelivery(t *testing.T) {
	t.Parallel()
	pg := testenv.PrivatePostgres(t)
	r := setup(t, pg.URL())
	if err := setReadOnly(pg.URL(), true); err != nil {
		t.Fatal(err)
	}
	const events = 40
	for i := range events {
		r.publish(fmt.Sprintf("evt_%d", i), `{}`, "")
	}
	const ackWait = 2 * time.Second
	var maxDelivery atomic.Uint64
	m := telemetry.NewMetrics()
	r.run(processor.Options{
		Config:  config.Processor{AckWait: ackWait, BatchSize: 4, Concurrency: 2},
		Metrics: m,
		Handler: processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
			for d := maxDelivery.Load(); ev.Delivery > d && !maxDelivery.CompareAndSwap(d, ev.Delivery); d = maxDelivery.Load() {
			}
			return nil, nil
		}),
	})

	info := func() *jetstream.ConsumerInfo {
		t.Helper()
		ctx := context.Background()
		c, err := r.js.Consumer(ctx, envelope.StreamIn, envelope.ConsumerName)
		if err != nil {
			t.Fatal(err)
		}
		i, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	// Held through several ack waits.
	heldUntil := time.Now().Add(3 * ackWait)
	testenv.Eventually(t, time.Minute, func() bool {
		return testutil.ToFloat64(m.Failures.WithLabelValues("", "db", "")) >= 8 && time.Now().After(heldUntil)
	}, "the batches were never retried")
	if i := info(); i.NumRedelivered != 0 || i.Delivered.Consumer >= events {
		t.Fatalf("while read-only: %d redelivered, %d of %d delivered; want none redelivered, the pull stopped before the backlog",
			i.NumRedelivered, i.Delivered.Consumer, events)
	}

	if err := setReadOnly(pg.URL(), false); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'processed'`) == events && info().NumAckPending == 0
	}, "the backlog was never processed")
	if i := info(); i.Delivered.Consumer != events || i.NumRedelivered != 0 || maxDelivery.Load() != 1 {
		t.Errorf("JetStream delivered %d times (%d redelivered) for %d messages, handler saw delivery %d; want each delivered once",
			i.Delivered.Consumer, i.NumRedelivered, events, maxDelivery.Load())
	}
}
