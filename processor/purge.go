package processor

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
)

// PurgeCutoffs are the purge's cutoffs for cfg's retention at now.
func PurgeCutoffs(cfg *config.Config, now time.Time) store.Cutoffs {
	r := cfg.Retention
	c := store.Cutoffs{Inbox: now.Add(-r.Inbox), History: now.Add(-r.History), Evidence: now.Add(-r.Evidence)}
	for _, in := range cfg.Integrations {
		if in.InboxRetention > 0 {
			if c.InboxFor == nil {
				c.InboxFor = map[string]time.Time{}
			}
			c.InboxFor[in.Name] = now.Add(-in.InboxRetention)
		}
	}
	return c
}

// ErrPurgeBusy is a purge that found another runner (a processor's
// scheduled pass, another `intake purge`) holding the purge lock.
var ErrPurgeBusy = errors.New("another purge is running (a processor's scheduled pass or another intake purge); try again when it ends")

// Purge runs one purge pass for cfg at now, if no other runner holds the
// purge lock (ErrPurgeBusy if one does), and returns what it removed.
func Purge(ctx context.Context, st *store.Store, cfg *config.Config, now time.Time) ([]store.Purged, error) {
	lock, err := st.LockPurge(ctx)
	if err != nil {
		return nil, err
	}
	if lock == nil {
		return nil, ErrPurgeBusy
	}
	defer lock.Release()
	return st.Purge(ctx, PurgeCutoffs(cfg, now), cfg.Retention.BatchSize)
}

// Purger runs the purge every retention.interval in each processor; the
// purge lock lets one of them at a time do it.
type Purger struct {
	st      *store.Store
	cfg     *config.Config
	log     *slog.Logger
	now     func() time.Time
	metrics purgeMetrics
}

type purgeMetrics struct {
	rows        *prometheus.CounterVec // table
	passes      *prometheus.CounterVec // result: done, busy, failed
	lastDone    prometheus.Gauge
	oldest      *prometheus.GaugeVec // table
	overdue     *prometheus.GaugeVec // table
	tableBytes  *prometheus.GaugeVec // table
	passSeconds prometheus.Histogram
}

// PurgerOptions configure a Purger.
type PurgerOptions struct {
	Store  *store.Store
	Config *config.Config
	// Registry gets the purge's metrics; nil: not registered.
	Registry prometheus.Registerer
	Log      *slog.Logger
	// Now is the clock; defaults to time.Now (tests inject one).
	Now func() time.Time
}

// NewPurger builds the scheduled purge.
func NewPurger(o PurgerOptions) (*Purger, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	m := purgeMetrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "purge",
			Name: "rows_total", Help: "Rows the purge removed past their retention, by table."}, []string{"table"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "purge",
			Name: "passes_total", Help: "Scheduled purge passes by result: done (everything past retention removed), busy (another runner held the lock), failed."}, []string{"result"}),
		lastDone: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "purge",
			Name: "last_done_timestamp_seconds", Help: "When a purge pass by this processor last removed everything past retention (Unix time; 0 before the first)."}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "retention",
			Name: "oldest_seconds", Help: "Age of the oldest row kept, by table (those with a btree on their time column: inbox, conflicts, rejected_messages, replays), after this processor's last purge pass."}, []string{"table"}),
		overdue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "retention",
			Name: "overdue_seconds", Help: "How far past its retention the oldest row the purge should have removed is, by table, after this processor's last pass: 0 while the purge keeps up."}, []string{"table"}),
		tableBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "retention",
			Name: "table_bytes", Help: "Size of each table with its indexes and TOAST, after this processor's last purge pass."}, []string{"table"}),
		passSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "intake", Subsystem: "purge",
			Name: "pass_seconds", Help: "Duration of purge passes that held the lock.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}),
	}
	if o.Registry != nil {
		for _, c := range []prometheus.Collector{m.rows, m.passes, m.lastDone, m.oldest, m.overdue, m.tableBytes, m.passSeconds} {
			if err := o.Registry.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return &Purger{st: o.Store, cfg: o.Config, log: o.Log, now: o.Now, metrics: m}, nil
}

// Run purges every retention.interval until ctx ends; the first pass comes
// one interval after the start, so a fleet restarting together does not
// purge first thing. With retention.disabled it does nothing.
func (p *Purger) Run(ctx context.Context) error {
	if p.cfg.Retention.Disabled {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(p.cfg.Retention.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			p.Pass(ctx)
		}
	}
}

// Pass runs one scheduled pass: purge if no other runner does, then read
// the tables' oldest rows and sizes. Errors are logged and counted, never
// returned: the next pass tries again from where the rows are.
func (p *Purger) Pass(ctx context.Context) {
	start := time.Now()
	purged, err := Purge(ctx, p.st, p.cfg, p.now())
	for _, r := range purged {
		p.metrics.rows.WithLabelValues(r.Table).Add(float64(r.Rows))
	}
	switch {
	case errors.Is(err, ErrPurgeBusy):
		p.metrics.passes.WithLabelValues("busy").Inc()
		return
	case err != nil:
		p.metrics.passes.WithLabelValues("failed").Inc()
		if ctx.Err() == nil {
			p.log.Warn("purge pass failed; the next one resumes", "err", err)
		}
		return
	}
	p.metrics.passes.WithLabelValues("done").Inc()
	p.metrics.lastDone.SetToCurrentTime()
	p.metrics.passSeconds.Observe(time.Since(start).Seconds())
	var rows int64
	for _, r := range purged {
		rows += r.Rows
	}
	if rows > 0 {
		p.log.Info("purged rows past retention", "rows", rows, "took", time.Since(start).Round(time.Millisecond))
	}
	now := p.now()
	stats, err := p.st.RetentionStats(ctx, PurgeCutoffs(p.cfg, now), now)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("reading the tables' oldest rows and sizes failed", "err", err)
		}
		return
	}
	for _, s := range stats {
		p.metrics.tableBytes.WithLabelValues(s.Table).Set(float64(s.Bytes))
		p.metrics.overdue.WithLabelValues(s.Table).Set(s.Overdue.Seconds())
		if s.Oldest != nil {
			p.metrics.oldest.WithLabelValues(s.Table).Set(s.Oldest.Seconds())
		}
	}
}
