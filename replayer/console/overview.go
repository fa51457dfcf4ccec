package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// overviewWindow is a period the overview counts over.
type overviewWindow struct {
	Name string
	Dur  time.Duration
}

var overviewWindows = []overviewWindow{{"last hour", time.Hour}, {"last day", 24 * time.Hour}}

// windowSince are overviewWindows as the lists' since filter.
var windowSince = []string{"1h", "24h"}

// stats are one integration's counts over one window, from Postgres.
type stats struct {
	Accepted, Duplicates, Conflicts, Failed, Quarantined int64
	// Rejected: messages the processor refused before the inbox decision
	// (a claim it could not trust, a replayed body), by rejected_at.
	Rejected  int64
	PerSecond float64 // Accepted over the window
	// Accepted and Duplicates: events first received in the window and
	// their extra deliveries. Failed and Quarantined: by last delivery.
	// LagP50, LagP95: first receipt to processed, of the window's events.
	LagP50, LagP95 time.Duration
	// Refused: requests ingress refused in the window (by the end of the
	// 10 s summary that counted them), Refusals the same by status code
	// and reason, the most first.
	Refused  int64
	Refusals []store.RefusalCount
}

type integrationOverview struct {
	Name    string
	Windows []stats // as overviewWindows
	Pending int64   // outbox rows not yet published, now
	// Retrying are the events whose handler failed and that wait for their
	// next attempt, now (no inbox row yet: store.RetryingCounts).
	Retrying int64
	// Waiting is the age of the integration's oldest INTAKE_IN message
	// past the processors' ack floor, now; nil when none waits. Backlog
	// is how many of its messages are past the floor; nil when they
	// could not be counted (apiclient.IntegrationStatus.Backlog).
	Waiting *time.Duration
	Backlog *uint64
	// Hourly are the events first received per bucket of the chart's
	// range (chartRange), oldest first, with the failed and quarantined
	// among them.
	Hourly []bucket
	Max    int64
}

type bucket struct {
	At          time.Time
	Accepted    int64
	FailedOrQ   int64
	Height, Bad float64 // bar heights in the chart's units
}

// chartRange is a span the overview's charts can cover, in buckets of
// Bucket (24 to 28 bars).
type chartRange struct {
	Param, Name    string
	Span, Bucket   time.Duration
	Label, XFormat string // the bucket's name in bar titles; the x axis's time format
}

var chartRanges = []chartRange{
	{"6h", "6 hours", 6 * time.Hour, 15 * time.Minute, "per 15 minutes", "15:04"},
	{"24h", "24 hours", 24 * time.Hour, time.Hour, "per hour", "15:04"},
	{"7d", "7 days", 7 * 24 * time.Hour, 6 * time.Hour, "per 6 hours", "Jan 2 15:04"},
}

// defaultChart is chartRanges' default: the last day by the hour.
const defaultChart = "24h"

func chartParams() []string {
	out := make([]string, len(chartRanges))
	for i, c := range chartRanges {
		out[i] = c.Param
	}
	return out
}

func findChart(param string) chartRange {
	for _, c := range chartRanges {
		if c.Param == param {
			return c
		}
	}
	return chartRanges[1]
}

type overviewData struct {
	Chart        chartRange
	Start        time.Time // the chart's first bucket
	Windows      []overviewWindow
	Integrations []integrationOverview
	At           time.Time
	Stream       apiclient.StreamStatus // INTAKE_IN's backlog, as GET /api/v1/status reads it
}

// overviewRefresh is how often the overview reloads itself, in seconds.
const overviewRefresh = 30

func (overviewData) refresh() int { return overviewRefresh }

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	chart := r.URL.Query().Get("chart")
	if err := checkChoice("chart", chart, chartParams()); err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if chart == "" {
		chart = defaultChart
	}
	d, err := c.loadOverview(r.Context(), c.now(), findChart(chart))
	if err != nil {
		c.internal(w, r, "overview", err)
		return
	}
	c.render(w, r, http.StatusOK, "overview", "Overview", d)
}

// chartHeight is the sparkline's height in SVG units.
const chartHeight = 40

// loadOverview reads the counts through the store's overview queries
// (pkg/store/overview.go): per window, the events received, the failed and
// quarantined, the conflicts and ingress's refusals; then the outbox
// pending now and the chart over chart's range.
func (c *Console) loadOverview(ctx context.Context, now time.Time, chart chartRange) (overviewData, error) {
	o := overviewBuilder{by: map[string]*integrationOverview{}}
	for i, win := range overviewWindows {
		if err := o.window(ctx, c.ro.Store, i, now.Add(-win.Dur)); err != nil {
			return overviewData{}, err
		}
	}
	pending, err := c.ro.Store.OutboxPendingByIntegration(ctx)
	if err != nil {
		return overviewData{}, fmt.Errorf("overview: %w", err)
	}
	for _, p := range pending {
		o.get(p.Integration).Pending = p.Count
	}
	retrying, err := c.ro.Store.RetryingCounts(ctx)
	if err != nil {
		return overviewData{}, fmt.Errorf("overview: %w", err)
	}
	for in, n := range retrying {
		o.get(in).Retrying = int64(n)
	}
	n := int(chart.Span / chart.Bucket)
	start := now.Truncate(chart.Bucket).Add(-time.Duration(n-1) * chart.Bucket)
	hours, err := c.ro.Store.BucketedSince(ctx, start, chart.Bucket)
	if err != nil {
		return overviewData{}, fmt.Errorf("overview: %w", err)
	}
	st, err := c.rp.Status(ctx, now)
	if err != nil {
		return overviewData{}, fmt.Errorf("overview: %w", err)
	}
	for _, x := range st.Integrations {
		if x.OldestUnprocessedAt != nil {
			age := (time.Duration(x.OldestAgeSeconds) * time.Second)
			o.get(x.Name).Waiting, o.get(x.Name).Backlog = &age, x.Backlog
		}
	}
	return overviewData{Chart: chart, Start: start, Windows: overviewWindows, At: now,
		Integrations: o.charted(start, chart, hours), Stream: st.Stream}, nil
}

// overviewBuilder gathers the overview's counts by integration.
type overviewBuilder struct {
	by map[string]*integrationOverview
}

func (o *overviewBuilder) get(name string) *integrationOverview {
	if io, ok := o.by[name]; ok {
		return io
	}
	io := &integrationOverview{Name: name, Windows: make([]stats, len(overviewWindows))}
	o.by[name] = io
	return io
}

// window fills window i's counts from since on.
func (o *overviewBuilder) window(ctx context.Context, st *store.Store, i int, since time.Time) error {
	received, err := st.ReceivedSince(ctx, since)
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	for _, r := range received {
		s := &o.get(r.Integration).Windows[i]
		s.Accepted, s.Duplicates, s.LagP50, s.LagP95 = r.Events, r.Duplicates, r.LagP50, r.LagP95
		s.PerSecond = float64(r.Events) / overviewWindows[i].Dur.Seconds()
	}
	unresolved, err := st.UnresolvedSince(ctx, since)
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	for _, u := range unresolved {
		if s := &o.get(u.Integration).Windows[i]; u.Status == string(inbox.StatusFailed) {
			s.Failed = u.Count
		} else {
			s.Quarantined = u.Count
		}
	}
	conflicts, err := st.ConflictsSince(ctx, since)
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	for _, c := range conflicts {
		o.get(c.Integration).Windows[i].Conflicts = c.Count
	}
	rejected, err := st.RejectedSince(ctx, since)
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	for _, r := range rejected {
		o.get(r.Integration).Windows[i].Rejected = r.Count
	}
	refused, err := st.RefusalsSince(ctx, since)
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	for _, r := range refused {
		s := &o.get(r.Integration).Windows[i]
		s.Refused += r.Count
		s.Refusals = append(s.Refusals, r)
	}
	return nil
}

// charted lays each integration's chart range from start out as bars (a
// bucket without events is a zero bar) and returns the integrations by
// name.
func (o *overviewBuilder) charted(start time.Time, chart chartRange, hours []store.HourCount) []integrationOverview {
	n := int(chart.Span / chart.Bucket)
	hourly := map[string]map[int64]bucket{}
	for _, h := range hours {
		o.get(h.Integration)
		if hourly[h.Integration] == nil {
			hourly[h.Integration] = map[int64]bucket{}
		}
		hourly[h.Integration][h.Hour.Unix()] = bucket{At: h.Hour, Accepted: h.Events, FailedOrQ: h.Unresolved}
	}
	var out []integrationOverview
	for name, io := range o.by {
		for h := range n {
			at := start.Add(time.Duration(h) * chart.Bucket)
			b := hourly[name][at.Unix()]
			b.At = at
			io.Hourly = append(io.Hourly, b)
			io.Max = max(io.Max, b.Accepted)
		}
		for i := range io.Hourly {
			if io.Max > 0 {
				io.Hourly[i].Height = float64(io.Hourly[i].Accepted) * chartHeight / float64(io.Max)
				io.Hourly[i].Bad = float64(io.Hourly[i].FailedOrQ) * chartHeight / float64(io.Max)
			}
		}
		out = append(out, *io)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (d overviewData) write(w *writer, _ page) {
	w.m(`<p class="quick" id="checks-links">Also: <a href="/ui/rejections?since=24h">messages rejected in the last day</a> · <a href="/ui/gaps">gap check</a> · <a href="/ui/redrive">re-drive passes</a> · <a href="/ui/replays">replays</a></p>` + "\n")
	w.m(`<p class="quick" id="chart-ranges">Charts: `)
	for i, cr := range chartRanges {
		if i > 0 {
			w.m(` · `)
		}
		if cr.Param == d.Chart.Param {
			w.m(`<b>`).t(cr.Name).m(`</b>`)
		} else {
			w.m(`<a href="`).u(listLink("/ui/", url.Values{"chart": {cr.Param}})).m(`">`).t(cr.Name).m(`</a>`)
		}
	}
	w.m("</p>\n")
	w.m(`<p class="hint">From Postgres at `).t(ts(d.At)).m(`: accepted events (and their duplicate deliveries) by first receipt, failed and quarantined by last delivery, conflicts by detection, rejected (messages the processor refused before the inbox decision) by rejection; processing lag is first receipt to processed (p50 / p95), replays left out; refused are the requests ingress refused, by status code and reason (sent every 10 s); retrying (a handler failed, the next attempt is due), the messages waiting in INTAKE_IN past the processors' ack floor (how many, and the oldest's age) and outbox pending are now.</p>
`)
	st := d.Stream
	w.m(`<p id="backlog">INTAKE_IN (durable `).t(st.Durable).m(`): <b>`).un(st.Pending).m(`</b> undelivered, <b>`).n(int64(st.AckPending)).
		m(`</b> unacknowledged (in a batch or waiting out a retry), `)
	if st.OldestUnprocessedAt != nil {
		w.m(`oldest unprocessed <b id="oldest">`).t((time.Duration(st.OldestAgeSeconds) * time.Second).String()).m(`</b> old`)
	} else {
		w.m(`nothing waiting`)
	}
	w.m(`. This page reloads every `).n(int64(overviewRefresh)).m(` s.</p>
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
		row("events/s", func(s stats) { w.t(perSecond(s.PerSecond)) })
		row("duplicates", func(s stats) { w.n(s.Duplicates) })
		row("conflicts", func(s stats) { w.n(s.Conflicts) })
		row("failed", func(s stats) { w.n(s.Failed) })
		row("quarantined", func(s stats) { w.n(s.Quarantined) })
		w.m(`<tr><td><a href="`).u(listLink("/ui/rejections", url.Values{"integration": {o.Name}, "since": {"24h"}})).m(`">rejected</a></td>`)
		for i, s := range o.Windows {
			w.m(`<td class="rejected"><a href="`).u(listLink("/ui/rejections", url.Values{"integration": {o.Name}, "since": {windowSince[i]}})).m(`">`).n(s.Rejected).m(`</a></td>`)
		}
		w.m("</tr>\n")
		row("processing lag", func(s stats) {
			if s.Accepted == 0 { // no event to measure: no lag, not a lag of 0s
				w.m(`–`)
				return
			}
			w.t(s.LagP50.String()).m(` / `).t(s.LagP95.String())
		})
		row(`<span title="requests ingress refused: 401 bad signature, 413 too large, 429 rate limited, 503 busy or the stream away, 400 malformed">refused</span>`,
			func(s stats) { writeRefusals(w, s) })
		w.m(`<tr><td><a href="`).u(listLink("/ui/events", url.Values{"integration": {o.Name}, "status": {string(store.StatusRetrying)}})).
			m(`">retrying</a> now</td><td colspan="2" class="retrying">`).n(o.Retrying).m(`</td></tr>
<tr><td>waiting in INTAKE_IN</td><td colspan="2" class="waiting">`)
		switch {
		case o.Waiting == nil:
			w.m(`none`)
		case o.Backlog == nil: // every scan slot busy: not counted
			w.m(`oldest `).t(o.Waiting.String())
		default:
			w.m(`<span class="backlog">`).un(*o.Backlog).m(`</span>, oldest `).t(o.Waiting.String())
		}
		w.m(`</td></tr>
<tr><td>outbox pending</td><td colspan="2">`).n(o.Pending).m(`</td></tr>
</tbody></table>
`)
		writeChart(w, d, o)
		w.m(`</section>`)
	}
	if len(d.Integrations) == 0 {
		w.m(`<p>No events in the last day.</p>`)
	}
	w.m("\n</div>\n")
}

// perSecond is an events/s figure: two decimals, and "<0.01" for a rate
// above zero that they would print as 0.00 (3 events in an hour).
func perSecond(r float64) string {
	if r > 0 && r < 0.005 {
		return "<0.01"
	}
	return strconv.FormatFloat(r, 'f', 2, 64)
}

// writeRefusals writes a window's refusals: the total, then each status
// code and reason with its count.
func writeRefusals(w *writer, s stats) {
	w.m(`<span class="refused">`).n(s.Refused).m(`</span>`)
	if len(s.Refusals) == 0 {
		return
	}
	w.m(`<ul class="refusals">`)
	for _, r := range s.Refusals {
		w.m(`<li><code>`).n(int64(r.StatusCode)).m(`</code> `).t(r.Reason).m(` `).n(r.Count).m(`</li>`)
	}
	w.m(`</ul>`)
}

// writeChart writes an integration's bars over d.Chart with their axes:
// the y axis from 0 to the busiest bucket, the x axis's first, middle and
// last bucket times (UTC), and a bar's own figures in its title.
func writeChart(w *writer, d overviewData, o integrationOverview) {
	n := int64(len(o.Hourly))
	w.m(`<figure class="chart">
<div class="yaxis" aria-hidden="true"><span>`)
	if o.Max > 0 { // an empty chart's axis is its 0 only
		w.n(o.Max).m(`</span><span>`).t(strconv.FormatFloat(float64(o.Max)/2, 'f', -1, 64))
	} else {
		w.m(`</span><span>`)
	}
	w.m(`</span><span>0</span></div>
<svg class="spark" viewBox="0 0 `).n(n * 10).m(` 40" preserveAspectRatio="none" role="img" aria-label="events `).t(d.Chart.Label).m(`, last `).t(d.Chart.Name).m(` (max `).n(o.Max).m(`)">
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
<div class="xaxis" aria-hidden="true">`)
	if len(o.Hourly) > 0 {
		for _, i := range []int{0, len(o.Hourly) / 2, len(o.Hourly) - 1} {
			w.m(`<span>`).t(o.Hourly[i].At.UTC().Format(d.Chart.XFormat)).m(`</span>`)
		}
	}
	w.m(`</div>
<figcaption class="hint">events `).t(d.Chart.Label).m(`, last `).t(d.Chart.Name).m(`, UTC (max `).n(o.Max).m(`); red: failed or quarantined</figcaption>
</figure>
`)
}
