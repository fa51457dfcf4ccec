package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"
)

// overviewWindow is a period the overview counts over.
type overviewWindow struct {
	Name string
	Dur  time.Duration
}

var overviewWindows = []overviewWindow{{"last hour", time.Hour}, {"last day", 24 * time.Hour}}

// stats are one integration's counts over one window, from Postgres.
type stats struct {
	Accepted, Duplicates, Conflicts, Failed, Quarantined int64
	// Accepted and Duplicates: events first received in the window and
	// their extra deliveries. Failed and Quarantined: by last delivery.
	// LagP50, LagP95: first receipt to processed, of the window's events.
	LagP50, LagP95 time.Duration
}

type integrationOverview struct {
	Name    string
	Windows []stats // as overviewWindows
	Pending int64   // outbox rows not yet published, now
	// Hourly are the events first received per hour over the last day,
	// oldest first, with the failed and quarantined among them.
	Hourly []bucket
	Max    int64
}

type bucket struct {
	At          time.Time
	Accepted    int64
	FailedOrQ   int64
	Height, Bad float64 // bar heights in the chart's units
}

type overviewData struct {
	Windows      []overviewWindow
	Integrations []integrationOverview
	At           time.Time
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	d, err := c.loadOverview(r.Context(), c.now())
	if err != nil {
		c.internal(w, r, "overview", err)
		return
	}
	c.render(w, r, http.StatusOK, "overview", "Overview", d)
}

// chartHeight is the sparkline's height in SVG units.
const chartHeight = 40

// loadOverview reads the counts with a handful of aggregate queries over
// the inbox, conflicts and outbox, each on an existing index's range (the
// window's rows; outbox_pending is small).
func (c *Console) loadOverview(ctx context.Context, now time.Time) (overviewData, error) {
	pool := c.ro.Store.Pool()
	d := overviewData{Windows: overviewWindows, At: now}
	by := map[string]*integrationOverview{}
	get := func(name string) *integrationOverview {
		if o, ok := by[name]; ok {
			return o
		}
		o := &integrationOverview{Name: name, Windows: make([]stats, len(overviewWindows))}
		by[name] = o
		return o
	}
	for i, win := range overviewWindows {
		since := now.Add(-win.Dur)
		// Events first received in the window (inbox_received_idx): their
		// count, the extra deliveries of them, and their processing lag.
		rows, err := pool.Query(ctx, `
			SELECT integration, count(*), coalesce(sum(greatest(delivery_count - 1, 0)), 0),
				coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM processed_at - first_received_at))
					FILTER (WHERE processed_at IS NOT NULL), 0),
				coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM processed_at - first_received_at))
					FILTER (WHERE processed_at IS NOT NULL), 0)
			FROM intake.inbox WHERE first_received_at >= $1
			GROUP BY integration`, since)
		if err != nil {
			return d, fmt.Errorf("overview: inbox: %w", err)
		}
		for rows.Next() {
			var name string
			var n, dups int64
			var p50, p95 float64
			if err := rows.Scan(&name, &n, &dups, &p50, &p95); err != nil {
				rows.Close()
				return d, fmt.Errorf("overview: inbox: %w", err)
			}
			s := &get(name).Windows[i]
			s.Accepted, s.Duplicates, s.LagP50, s.LagP95 = n, dups, secs(p50), secs(p95)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return d, fmt.Errorf("overview: inbox: %w", err)
		}
		// Failed and quarantined by their last delivery (inbox_status_idx).
		rows, err = pool.Query(ctx, `SELECT integration, status, count(*) FROM intake.inbox
			WHERE status IN ('failed', 'quarantined') AND last_received_at >= $1 GROUP BY 1, 2`, since)
		if err != nil {
			return d, fmt.Errorf("overview: failed: %w", err)
		}
		for rows.Next() {
			var name, status string
			var n int64
			if err := rows.Scan(&name, &status, &n); err != nil {
				rows.Close()
				return d, fmt.Errorf("overview: failed: %w", err)
			}
			if s := &get(name).Windows[i]; status == "failed" {
				s.Failed = n
			} else {
				s.Quarantined = n
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return d, fmt.Errorf("overview: failed: %w", err)
		}
		rows, err = pool.Query(ctx, `SELECT integration, count(*) FROM intake.conflicts WHERE detected_at >= $1 GROUP BY integration`, since)
		if err != nil {
			return d, fmt.Errorf("overview: conflicts: %w", err)
		}
		for rows.Next() {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				rows.Close()
				return d, fmt.Errorf("overview: conflicts: %w", err)
			}
			get(name).Windows[i].Conflicts = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return d, fmt.Errorf("overview: conflicts: %w", err)
		}
	}
	rows, err := pool.Query(ctx, `SELECT o.integration, count(*) FROM intake.outbox_pending p
		JOIN intake.outbox o ON o.id = p.id GROUP BY o.integration`)
	if err != nil {
		return d, fmt.Errorf("overview: outbox: %w", err)
	}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			rows.Close()
			return d, fmt.Errorf("overview: outbox: %w", err)
		}
		get(name).Pending = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return d, fmt.Errorf("overview: outbox: %w", err)
	}
	start := now.Truncate(time.Hour).Add(-23 * time.Hour)
	rows, err = pool.Query(ctx, `SELECT integration, date_trunc('hour', first_received_at), count(*),
			count(*) FILTER (WHERE status IN ('failed', 'quarantined'))
		FROM intake.inbox WHERE first_received_at >= $1 GROUP BY 1, 2`, start)
	if err != nil {
		return d, fmt.Errorf("overview: hourly: %w", err)
	}
	hourly := map[string]map[int64]bucket{}
	for rows.Next() {
		var name string
		var b bucket
		if err := rows.Scan(&name, &b.At, &b.Accepted, &b.FailedOrQ); err != nil {
			rows.Close()
			return d, fmt.Errorf("overview: hourly: %w", err)
		}
		get(name)
		if hourly[name] == nil {
			hourly[name] = map[int64]bucket{}
		}
		hourly[name][b.At.Unix()] = b
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return d, fmt.Errorf("overview: hourly: %w", err)
	}
	for name, o := range by {
		for h := range 24 {
			at := start.Add(time.Duration(h) * time.Hour)
			b := hourly[name][at.Unix()]
			b.At = at
			o.Hourly = append(o.Hourly, b)
			o.Max = max(o.Max, b.Accepted)
		}
		for i := range o.Hourly {
			if o.Max > 0 {
				o.Hourly[i].Height = float64(o.Hourly[i].Accepted) * chartHeight / float64(o.Max)
				o.Hourly[i].Bad = float64(o.Hourly[i].FailedOrQ) * chartHeight / float64(o.Max)
			}
		}
		d.Integrations = append(d.Integrations, *o)
	}
	sort.Slice(d.Integrations, func(i, j int) bool { return d.Integrations[i].Name < d.Integrations[j].Name })
	return d, nil
}

func secs(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

func (d overviewData) write(w *writer, _ page) {
	w.m(`<p class="hint">From Postgres at `).t(ts(d.At)).m(`: accepted events (and their duplicate deliveries) by first receipt, failed and quarantined by last delivery, conflicts by detection; processing lag is first receipt to processed (p50 / p95); outbox pending is now.</p>
<div class="cards" id="overview">
`)
	for _, o := range d.Integrations {
		w.m(`<section class="card" data-integration="`).t(o.Name).m(`">
<h3><a href="`).u(listLink("/ui/events", url.Values{"integration": {o.Name}})).m(`">`).t(o.Name).m(`</a></h3>
<table>
<thead><tr><th></th>`)
		for _, win := range d.Windows {
			w.m(`<th>`).t(win.Name).m(`</th>`)
		}
		w.m("</tr></thead>\n<tbody>\n")
		row := func(name markup, cell func(s stats)) {
			w.m(`<tr><td>`).m(name).m(`</td>`)
			for _, s := range o.Windows {
				w.m(`<td>`)
				cell(s)
				w.m(`</td>`)
			}
			w.m("</tr>\n")
		}
		row("accepted", func(s stats) { w.n(s.Accepted) })
		row("duplicates", func(s stats) { w.n(s.Duplicates) })
		row("conflicts", func(s stats) { w.n(s.Conflicts) })
		row("failed", func(s stats) { w.n(s.Failed) })
		row("quarantined", func(s stats) { w.n(s.Quarantined) })
		row("processing lag", func(s stats) { w.t(s.LagP50.String()).m(` / `).t(s.LagP95.String()) })
		w.m(`<tr><td>outbox pending</td><td colspan="2">`).n(o.Pending).m(`</td></tr>
</tbody></table>
<svg class="spark" viewBox="0 0 240 40" preserveAspectRatio="none" role="img" aria-label="events per hour, last 24 hours (max `).n(o.Max).m(`)">
`)
		for i, b := range o.Hourly {
			x := int64(i * 10)
			w.m(`<rect class="bar" x="`).n(x).m(`" y="`).f(chartHeight - b.Height).m(`" width="8" height="`).f(b.Height).m(`"><title>`).
				t(ts(b.At)).m(`: `).n(b.Accepted).m(` events, `).n(b.FailedOrQ).m(` failed or quarantined</title></rect>`)
			if b.Bad != 0 {
				w.m(`<rect class="bad" x="`).n(x).m(`" y="`).f(chartHeight - b.Bad).m(`" width="8" height="`).f(b.Bad).m(`"></rect>`)
			}
			w.m("\n")
		}
		w.m(`</svg>
<p class="hint">events per hour, last 24 h (max `).n(o.Max).m(`); red: failed or quarantined</p>
</section>`)
	}
	if len(d.Integrations) == 0 {
		w.m(`<p>No events in the last day.</p>`)
	}
	w.m("\n</div>\n")
}
