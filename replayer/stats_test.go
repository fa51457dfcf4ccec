package replayer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/replayer"
)

// TestStatsGauges: the replayer's stats pass reports the failed and
// quarantined inbox rows by integration (0 for a configured integration
// without any) and the replays by state, with the running ones' progress.
func TestStatsGauges(t *testing.T) {
	t.Parallel()
	r := setup(t)
	ctx := context.Background()
	// Replays are read before any replayer runs: none would publish these.
	for _, q := range []string{
		`INSERT INTO intake.replays (id, requested_by, created_at, selector, mode, dry_run, rate, state, matched, published)
			VALUES (gen_random_uuid(), 'ops', now() - interval '1 hour', '{}', 'exact', false, 10, 'running', 10, 4)`,
		`INSERT INTO intake.replays (id, requested_by, selector, mode, dry_run, rate, state, matched, published)
			VALUES (gen_random_uuid(), 'ops', '{}', 'exact', false, 10, 'done', 3, 3)`,
	} {
		if _, err := r.db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	st, err := r.store.ReplayStatsNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ByState["running"] != 1 || st.ByState["done"] != 1 || st.ByState["failed"] != 0 ||
		st.RunningMatched != 10 || st.RunningPublished != 4 || st.OldestRunning < time.Hour {
		t.Fatalf("ReplayStatsNow = %+v", st)
	}
	if _, err := r.db.Exec(ctx, `UPDATE intake.replays SET state = 'cancelled' WHERE state = 'running'`); err != nil {
		t.Fatal(err)
	}

	r.failing.Store(key("evt_bad").String(), true)
	r.start()
	r.publish("evt_ok", "evt_bad")
	r.settled()
	reg := prometheus.NewRegistry()
	rp, _ := r.newReplayer(replayer.Options{StatsInterval: 50 * time.Millisecond, Registry: reg, Integrations: []string{"demo", "other"}})
	r.runReplayer(rp)
	want := `
# HELP intake_inbox_events Inbox rows failed or quarantined (the only statuses counted), by integration and status, at the replayer's last stats pass (aggregate with max).
# TYPE intake_inbox_events gauge
intake_inbox_events{integration="demo",status="failed"} 1
intake_inbox_events{integration="demo",status="quarantined"} 0
intake_inbox_events{integration="other",status="failed"} 0
intake_inbox_events{integration="other",status="quarantined"} 0
# HELP intake_replays Replays and redeliveries recorded, by state (running, done, failed, cancelled), at the replayer's last stats pass.
# TYPE intake_replays gauge
intake_replays{state="cancelled"} 1
intake_replays{state="done"} 1
intake_replays{state="failed"} 0
intake_replays{state="running"} 0
# HELP intake_replays_oldest_running_age_seconds Age of the oldest running replay (0 when none runs), at the replayer's last stats pass.
# TYPE intake_replays_oldest_running_age_seconds gauge
intake_replays_oldest_running_age_seconds 0
`
	names := []string{"intake_inbox_events", "intake_replays", "intake_replays_oldest_running_age_seconds"}
	var last error
	testenv.Eventually(t, 10*time.Second, func() bool {
		last = testutil.GatherAndCompare(reg, strings.NewReader(want), names...)
		return last == nil
	}, "stats gauges")
	if last != nil {
		t.Fatal(last)
	}
}
