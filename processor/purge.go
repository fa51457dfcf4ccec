package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
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
// scheduled pass, another `intake purge`) holding the purge lease.
var ErrPurgeBusy = errors.New("another purge is running (a processor's scheduled pass or another intake purge); try again when it ends")

// Purge runs one purge pass for cfg at now as holder (a name for this
// runner, unique among them), if no other runner holds the purge lease
// (ErrPurgeBusy if one does), and returns what it removed.
func Purge(ctx context.Context, st *store.Store, cfg *config.Config, now time.Time, holder string) ([]store.Purged, error) {
	lease, err := st.LeasePurge(ctx, holder)
	if err != nil {
		return nil, err
	}
	if lease == nil {
		return nil, ErrPurgeBusy
	}
	defer lease.Release()
	return st.Purge(ctx, PurgeCutoffs(cfg, now), cfg.Retention.BatchSize, lease)
}

// PurgeHolder names this process as a purge runner: host, pid and a random
// suffix, so two processes never share a lease.
func PurgeHolder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8])
}

// Purger runs the purge every retention.interval in each processor; the
// purge lease lets one of them at a time do it.
type Purger struct {
	st      *store.Store
	cfg     *config.Config
	log     *slog.Logger
	now     func() time.Time
	metrics *telemetry.Metrics
	holder  string
}

// PurgerOptions configure a Purger.
type PurgerOptions struct {
	Store   *store.Store
	Config  *config.Config
	Metrics *telemetry.Metrics // defaults to a private registry
	Log     *slog.Logger       // defaults to discarding, as every constructor's
	// Now is the clock; defaults to time.Now (tests inject one).
	Now func() time.Time
}

// NewPurger builds the scheduled purge. Store and Config are required; the
// rest default as their fields say.
func NewPurger(o PurgerOptions) (*Purger, error) {
	if o.Store == nil || o.Config == nil {
		return nil, errors.New("purger: PurgerOptions.Store and PurgerOptions.Config are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = telemetry.Discard()
	}
	if o.Metrics == nil {
		o.Metrics = telemetry.NewMetricsFor(telemetry.Roles{Processor: true})
	}
	return &Purger{st: o.Store, cfg: o.Config, log: o.Log, now: o.Now, metrics: o.Metrics, holder: PurgeHolder()}, nil
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
	purged, err := Purge(ctx, p.st, p.cfg, p.now(), p.holder)
	for _, r := range purged {
		p.metrics.PurgeRows.WithLabelValues(r.Table).Add(float64(r.Rows))
	}
	switch {
	case errors.Is(err, ErrPurgeBusy):
		// Another processor runs this pass and reports the tables.
		p.metrics.PurgePasses.WithLabelValues("busy").Inc()
		return
	case err != nil:
		// What the failing steps left shows in the overdue gauges below.
		p.metrics.PurgePasses.WithLabelValues("failed").Inc()
		if ctx.Err() == nil {
			p.log.Warn("purge pass failed; the next one resumes", "err", err)
		}
	default:
		p.metrics.PurgePasses.WithLabelValues("done").Inc()
		p.metrics.PurgeLastDone.SetToCurrentTime()
		p.metrics.PurgePassSeconds.Observe(time.Since(start).Seconds())
	}
	var rows int64
	for _, r := range purged {
		rows += r.Rows
	}
	if rows > 0 {
		p.log.Info("purged rows past retention", "rows", rows, "took", time.Since(start).Round(time.Millisecond))
	}
	if ctx.Err() != nil {
		return
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
		p.metrics.RetentionTableSize.WithLabelValues(s.Table).Set(float64(s.Bytes))
		p.metrics.RetentionOverdue.WithLabelValues(s.Table).Set(s.Overdue.Seconds())
		if s.Oldest != nil {
			p.metrics.RetentionOldest.WithLabelValues(s.Table).Set(s.Oldest.Seconds())
		} else {
			p.metrics.RetentionOldest.DeleteLabelValues(s.Table) // empty
		}
	}
}
