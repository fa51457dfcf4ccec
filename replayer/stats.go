package replayer

import (
	"context"
	"time"

	"github.com/intakehq/intake/pkg/inbox"
)

// The replayer, not the processor, reads the counts operators alert on from
// Postgres (failed and quarantined events, replays by state): it runs once
// or twice per deployment where processors scale out, it is the role that
// acts on those rows (replays), and the processors' pool stays on the
// inbox transaction. Every replica reports the same counts: aggregate
// with max.

// watchStats sets the Postgres-backed gauges every StatsInterval until ctx
// ends.
func (r *Replayer) watchStats(ctx context.Context) {
	// The inbox series set once, and the configured integrations': 0 when
	// no row is (or is any more) failed or quarantined, so that an alert on
	// a rise sees the series before it.
	seen := map[[2]string]bool{}
	for _, name := range r.o.Integrations {
		seen[[2]string{name, string(inbox.StatusFailed)}] = true
		seen[[2]string{name, string(inbox.StatusQuarantined)}] = true
	}
	t := time.NewTicker(r.o.StatsInterval)
	defer t.Stop()
	for {
		r.readStats(ctx, seen)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readStats reads the counts once; a failed read leaves the gauges as they
// were (intake_replayer_stats_timestamp_seconds shows how old they are).
func (r *Replayer) readStats(ctx context.Context, seen map[[2]string]bool) {
	ctx, cancel := context.WithTimeout(ctx, r.o.StatsInterval)
	defer cancel()
	var only []string
	if r.o.Shard != "" {
		only = r.o.Integrations
	}
	counts, err := r.o.Store.UnresolvedCounts(ctx, only)
	if err != nil {
		if ctx.Err() == nil {
			r.o.Log.Warn("replayer: reading the failed and quarantined counts failed", "err", err)
		}
		return
	}
	stats, err := r.o.Store.ReplayStatsNow(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.o.Log.Warn("replayer: reading the replay counts failed", "err", err)
		}
		return
	}
	now := map[[2]string]bool{}
	for _, c := range counts {
		k := [2]string{c.Integration, c.Status}
		now[k], seen[k] = true, true
		r.metrics.inboxEvents.WithLabelValues(c.Integration, c.Status).Set(float64(c.Count))
	}
	for k := range seen {
		if !now[k] {
			r.metrics.inboxEvents.WithLabelValues(k[0], k[1]).Set(0)
		}
	}
	for state, n := range stats.ByState {
		r.metrics.replays.WithLabelValues(state).Set(float64(n))
	}
	r.metrics.replaysMatched.Set(float64(stats.RunningMatched))
	r.metrics.replaysPublished.Set(float64(stats.RunningPublished))
	r.metrics.replaysOldest.Set(stats.OldestRunning.Seconds())
	r.metrics.statsAt.SetToCurrentTime()
}
