package processor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
)

// TestRelayReportsItsBacklogWhileBusy: the outbox gauges were read only
// after a pass that published nothing, so through a backlog they kept
// their last idle value (0). A busy relay reads them too, at most every
// lagEvery.
func TestRelayReportsItsBacklogWhileBusy(t *testing.T) {
	ctx := context.Background()
	st, js := relayDeps(t)
	if err := stream.Ensure(ctx, js, config.Stream{}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `WITH o AS (
			INSERT INTO intake.outbox (integration, account, event_id, subject, payload, created_at)
			SELECT 'demo', 'main', 'evt_' || i, 'intake.out.acme.demo.test', '{}', now() - interval '1 minute'
			FROM generate_series(1, 3) i RETURNING id, created_at)
		INSERT INTO intake.outbox_pending (id, created_at) SELECT id, created_at FROM o`); err != nil {
		t.Fatal(err)
	}
	m := telemetry.NewMetrics()
	r, err := NewRelay(RelayOptions{Store: st, JS: js, Config: config.Outbox{BatchSize: 1}, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.publishPending(ctx); err != nil || n != 1 {
		t.Fatalf("publishPending = %d, %v; want 1 row published", n, err)
	}
	if got := testutil.ToFloat64(m.OutboxPending); got != 2 {
		t.Errorf("intake_outbox_pending after a busy pass = %v, want the 2 rows left", got)
	}
	if got := testutil.ToFloat64(m.OutboxLag); got < 60 {
		t.Errorf("intake_outbox_lag_seconds after a busy pass = %v, want the age of the oldest left (over 60)", got)
	}
}

// TestPreparePartitionsFailsOnlyWhenInsertsWould: at start, partitions that
// cannot be made (here: another transaction holds the outbox's lock past
// the attach's lock_timeout) are a warning while the made ones reach past
// the next hour, and an error when they do not.
func TestPreparePartitionsFailsOnlyWhenInsertsWould(t *testing.T) {
	ctx := context.Background()
	st, js := relayDeps(t)
	m := telemetry.NewMetrics()
	r, err := NewRelay(RelayOptions{Store: st, JS: js, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.preparePartitions(ctx, time.Now()); err != nil {
		t.Fatalf("nothing held: %v", err)
	}
	until, err := st.OutboxPartitionsUntil(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ahead := testutil.ToFloat64(m.OutboxPartitionsAhead); ahead < float64(store.OutboxDaysAhead-1)*86400 {
		t.Errorf("partitions ahead gauge = %.0f s, want about %d days", ahead, store.OutboxDaysAhead)
	}

	lock, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `LOCK TABLE intake.outbox IN SHARE UPDATE EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// Making more days is blocked; the made ones still reach a day past
	// "now": a warning.
	if err := r.preparePartitions(ctx, until.Add(-24*time.Hour)); err != nil {
		t.Errorf("partitions reaching a day ahead, none made: %v; want a warning only", err)
	}
	// They end within the hour: every insert would fail.
	err = r.preparePartitions(ctx, until.Add(-30*time.Minute))
	if err == nil || !strings.Contains(err.Error(), "outbox partitions end at") {
		t.Errorf("partitions ending in 30 minutes, none made: %v; want the start refused", err)
	}
}

// relayDeps are what a relay needs: a migrated database's store and a
// JetStream client of an embedded server.
func relayDeps(t *testing.T) (*store.Store, jetstream.JetStream) {
	t.Helper()
	ctx := context.Background()
	dbURL := testenv.Postgres(t)
	if err := store.Migrate(ctx, dbURL, nil); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, dbURL, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	nc, err := nats.Connect(testenv.NATS(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return st, js
}
