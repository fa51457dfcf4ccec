package processor_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

// retentionConfig keeps the inbox and history 90 days and evidence a year,
// for the rig's integration.
func retentionConfig() *config.Config {
	c := config.Config{Integrations: []config.Integration{demo}}.WithDefaults()
	return &c
}

// TestPurgePassKeepsWhatIsRetained runs events through a processor, ages
// some of them by 100 days in the database, and runs a purge pass on a
// clock the test holds: the aged processed events leave the inbox with
// their delivery history and executions; the young one, the conflict
// record and the quarantined row (with its history) stay. A redelivery of the kept key is a duplicate; a
// redelivery of a purged key is a new event (docs/retention.md).
func TestPurgePassKeepsWhatIsRetained(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	m := telemetry.NewMetrics()
	r.run(processor.Options{Metrics: m})
	r.publish("old", `{"v":"old"}`, "")
	r.publish("young", `{"v":"young"}`, "")
	r.publish("clash", `{"v":"one"}`, "")
	r.publish("bad", `{"v":"bad"}`, "")
	r.settled(4)
	r.publish("clash", `{"v":"two"}`, "clash-2")
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.conflicts`) == 1
	}, "the conflict is recorded")

	now := time.Now()
	aged := now.Add(-100 * 24 * time.Hour)
	for _, q := range []string{
		`UPDATE intake.inbox SET first_received_at = $1, last_received_at = $1 WHERE event_id IN ('old', 'clash', 'bad')`,
		`UPDATE intake.inbox SET status = 'quarantined' WHERE event_id = 'bad'`,
		`UPDATE intake.deliveries SET received_at = $1 WHERE event_id IN ('old', 'clash', 'bad')`,
		`UPDATE intake.executions SET executed_at = $1 WHERE event_id IN ('old', 'clash', 'bad')`,
		`UPDATE intake.conflicts SET detected_at = $1`,
	} {
		args := []any{aged}
		if q == `UPDATE intake.inbox SET status = 'quarantined' WHERE event_id = 'bad'` {
			args = nil
		}
		if _, err := r.db.Exec(context.Background(), q, args...); err != nil {
			t.Fatal(err)
		}
	}

	pm := telemetry.NewMetricsFor(telemetry.Roles{Processor: true})
	p, err := processor.NewPurger(processor.PurgerOptions{Store: r.store, Config: retentionConfig(), Metrics: pm,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	p.Pass(context.Background())

	if got := r.count(`SELECT count(*) FROM intake.inbox WHERE event_id IN ('young', 'bad')`); got != 2 {
		t.Errorf("%d of the young and the quarantined inbox rows left, want both", got)
	}
	if got := r.count(`SELECT count(*) FROM intake.inbox WHERE event_id IN ('old', 'clash')`); got != 0 {
		t.Errorf("%d aged processed inbox rows left, want none", got)
	}
	for _, table := range []string{"deliveries", "executions"} {
		if got := r.count(`SELECT count(*) FROM intake.` + table + ` WHERE event_id IN ('old', 'clash')`); got != 0 {
			t.Errorf("%d %s rows of the purged events left, want none", got, table)
		}
		// The quarantined event is evidence, and its history goes with it.
		if got := r.count(`SELECT count(*) FROM intake.` + table + ` WHERE event_id = 'bad'`); got == 0 {
			t.Errorf("the quarantined event's %s went", table)
		}
		if got := r.count(`SELECT count(*) FROM intake.` + table + ` WHERE event_id = 'young'`); got == 0 {
			t.Errorf("the young event's %s went", table)
		}
	}
	if got := r.count(`SELECT count(*) FROM intake.conflicts`); got != 1 {
		t.Errorf("%d conflicts left, want the one (evidence)", got)
	}
	if got := testutil.ToFloat64(pm.PurgePasses.WithLabelValues("done")); got != 1 {
		t.Errorf("passes done = %v", got)
	}

	// Redeliveries (past the stream's duplicate window: new message ids).
	dup := testutil.ToFloat64(m.Processed.WithLabelValues("demo", "duplicate"))
	fresh := testutil.ToFloat64(m.Processed.WithLabelValues("demo", "new"))
	r.publish("young", `{"v":"young"}`, "young-again")
	r.publish("old", `{"v":"old"}`, "old-again")
	testenv.Eventually(t, 30*time.Second, func() bool {
		return testutil.ToFloat64(m.Processed.WithLabelValues("demo", "duplicate")) == dup+1 &&
			testutil.ToFloat64(m.Processed.WithLabelValues("demo", "new")) == fresh+1
	}, "the kept key's redelivery is a duplicate, the purged key's is new")
	if got := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("young").String()); got != 1 {
		t.Errorf("the kept key applied %d times, want once", got)
	}
}

// TestTwoProcessorsNeverPurgeAtOnce: two processors' purgers over one
// database, passes started together again and again on a table that takes
// many batches: a watcher on pg_stat_activity never sees two sessions
// deleting at once, and while a third runner holds the lease both passes
// step aside (busy) and remove nothing.
func TestTwoProcessorsNeverPurgeAtOnce(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	ctx := context.Background()
	now := time.Now()
	fill := func() {
		t.Helper()
		if _, err := r.db.Exec(ctx, `INSERT INTO intake.deliveries (receipt_id, integration, account, event_id, received_at,
			instance, status_code, answer)
			SELECT 'r' || g || '-' || clock_timestamp(), 'demo', 'main', 'e' || g, $1, 'i', 200, 'duplicate'
			FROM generate_series(1, 3000) AS g`, now.Add(-100*24*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := retentionConfig()
	cfg.Retention.BatchSize = 50
	ms := []*telemetry.Metrics{telemetry.NewMetricsFor(telemetry.Roles{Processor: true}), telemetry.NewMetricsFor(telemetry.Roles{Processor: true})}
	var purgers []*processor.Purger
	for _, m := range ms {
		p, err := processor.NewPurger(processor.PurgerOptions{Store: r.store, Config: cfg, Metrics: m,
			Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		purgers = append(purgers, p)
	}

	var most atomic.Int32
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() {
		for watchCtx.Err() == nil {
			var n int32
			if err := r.db.QueryRow(watchCtx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()
				  AND query LIKE 'WITH d AS (DELETE FROM intake.deliveries%'`).Scan(&n); err == nil {
				if n > most.Load() {
					most.Store(n)
				}
			}
		}
	})
	for range 5 {
		fill()
		var wg sync.WaitGroup
		for _, p := range purgers {
			wg.Go(func() { p.Pass(ctx) })
		}
		wg.Wait()
	}
	stopWatch()
	watching.Wait()
	if got := most.Load(); got > 1 {
		t.Errorf("%d sessions were seen purging at once", got)
	}
	t.Logf("at most %d session seen purging at a time", most.Load())
	done := 0.0
	for _, m := range ms {
		done += testutil.ToFloat64(m.PurgePasses.WithLabelValues("done"))
	}
	if done < 5 {
		t.Errorf("%v passes done in 5 rounds, want at least one a round", done)
	}

	// A third runner (an `intake purge`) holds the lock: both step aside.
	lease, err := r.store.LeasePurge(ctx, "intake purge")
	if err != nil || lease == nil {
		t.Fatalf("lease: %v, %v", lease, err)
	}
	fill()
	for _, p := range purgers {
		p.Pass(ctx)
	}
	lease.Release()
	if got := r.count(`SELECT count(*) FROM intake.deliveries`); got != 3000 {
		t.Errorf("%d delivery rows while another runner held the lease, want all 3000", got)
	}
	for _, m := range ms {
		if got := testutil.ToFloat64(m.PurgePasses.WithLabelValues("busy")); got < 1 {
			t.Errorf("busy passes = %v, want at least the one under the third runner's lease", got)
		}
	}
}
