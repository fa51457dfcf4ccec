package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// filter is the events and failed pages' query: the fields of
// GET /api/v1/events, with times also in the browser's datetime-local form.
type filter struct {
	Integration, Tenant, Status, EventType, KeyPrefix string
	Since, Until                                      string // as typed
	Cursor                                            string
	since, until                                      time.Time
}

// parseFilter reads the query; an integration that is not one of
// integrations (the config's; none: any) is refused.
func parseFilter(v url.Values, integrations []string) (filter, error) {
	f := filter{Integration: v.Get("integration"), Tenant: v.Get("tenant"), Status: v.Get("status"),
		EventType: v.Get("event_type"), KeyPrefix: v.Get("key_prefix"), Since: v.Get("since"), Until: v.Get("until"),
		Cursor: v.Get("cursor")}
	if err := checkChoice("integration", f.Integration, integrations); err != nil {
		return f, err
	}
	var err error
	if f.since, err = parseTime("since", f.Since); err != nil {
		return f, err
	}
	f.until, err = parseTime("until", f.Until)
	return f, err
}

// parseTime takes RFC 3339, a datetime-local input's value (read as UTC),
// or a duration ago as the CLI does ("1h", "30m", "2d": apiclient.Ago).
func parseTime(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	if d, ok := apiclient.Ago(s); ok {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%s: not a time (a duration ago such as 1h or 2d, RFC 3339, or 2006-01-02T15:04 UTC): %q", name, s)
}

// checkChoice refuses a filter value that names nothing that can exist,
// saying what can: an empty page would read as "nothing there".
func checkChoice(name, v string, allowed []string) error {
	if v == "" || len(allowed) == 0 || slices.Contains(allowed, v) {
		return nil
	}
	return fmt.Errorf("%s: unknown %q; one of: %s", name, v, strings.Join(allowed, ", "))
}

// quickRanges are the events page's one-click "since" choices.
var quickRanges = []struct{ Label, Since string }{{"1 hour", "1h"}, {"24 hours", "24h"}, {"7 days", "7d"}}

func (f filter) store(limit int) store.EventFilter {
	return store.EventFilter{Integration: f.Integration, Tenant: f.Tenant, EventType: f.EventType, Status: f.Status,
		Since: f.since, Until: f.until, KeyPrefix: f.KeyPrefix, Limit: limit, Cursor: f.Cursor}
}

// query is the filter without the cursor, for links to the next page.
func (f filter) query() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"integration": f.Integration, "tenant": f.Tenant, "status": f.Status,
		"event_type": f.EventType, "key_prefix": f.KeyPrefix, "since": f.Since, "until": f.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// pageSize is the rows per page of the console's lists.
const pageSize = 50

type eventsData struct {
	Filter       filter
	Query        url.Values
	Events       []store.EventRecord
	Next         string
	Statuses     []string
	Integrations []string // the config's, offered as a choice; none: a free text input
	// PayloadSearch: the signed-in caller may search payloads (/ui/search).
	PayloadSearch bool
}

// statuses are the events filter's: the inbox's, and retrying (failed
// attempts, no inbox row yet: store.ListRetrying).
var statuses = []string{"processed", "stale", "failed", "quarantined", string(store.StatusRetrying)}

func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query(), c.ro.Integrations)
	d := eventsData{Filter: f, Query: f.query(), Statuses: statuses, Integrations: c.ro.Integrations,
		PayloadSearch: sessionFrom(r.Context()).operator() || c.ro.PayloadSearch.Viewers}
	if err == nil {
		err = checkChoice("status", f.Status, statuses)
	}
	if err != nil {
		c.renderErr(w, r, "events", "Events", d, err.Error())
		return
	}
	list := c.ro.Store.ListEvents
	if f.Status == string(store.StatusRetrying) {
		list = c.ro.Store.ListRetrying
	}
	d.Events, d.Next, err = list(r.Context(), f.store(pageSize))
	if errors.Is(err, store.ErrBadCursor) {
		c.renderErr(w, r, "events", "Events", d, "cursor: invalid (start again from the first page)")
		return
	}
	if err != nil {
		c.internal(w, r, "list events", err)
		return
	}
	c.render(w, r, http.StatusOK, "events", "Events", d)
}

// renderErr renders a page with a 400 and the message above its form.
func (c *Console) renderErr(w http.ResponseWriter, r *http.Request, name, title string, data content, msg string) {
	s := sessionFrom(r.Context())
	p := page{Title: title, Nav: name, User: s.caller, Data: data, Error: msg, CSRF: s.csrf(), Operator: s.operator()}
	c.write(w, http.StatusBadRequest, p)
}

// entry is one line of an event's timeline.
type entry struct {
	At     time.Time
	Kind   string // delivery, execution, replay, conflict, rejection, processed
	What   string
	Detail string
	Link   link // none when empty
}

type eventData struct {
	Event    store.EventRecord
	Timeline []entry
	Payload  payload
}

// payload is a raw message body from INTAKE_IN, pretty-printed when JSON.
type payload struct {
	Seq     int64
	Text    string
	JSON    bool
	SHA256  string
	Matches bool // the body's hash is the one recorded
	Missing string
	Raw     []byte // the body as stored
}

func (c *Console) event(w http.ResponseWriter, r *http.Request) {
	k, ok := envelope.ParseKey(r.URL.Query().Get("key"))
	if !ok {
		c.fail(w, r, http.StatusBadRequest, "key: not a scoped key {integration}/{account}/{event_id}")
		return
	}
	ctx := r.Context()
	ev, err := c.ro.Store.GetEvent(ctx, k)
	if errors.Is(err, store.ErrNotFound) {
		ev, err = c.ro.Store.RetryingEvent(ctx, k) // failing, waiting for its next attempt?
	}
	if errors.Is(err, store.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "No inbox row for "+k.String()+", and no handler attempt waiting for a retry.")
		return
	}
	if err != nil {
		c.internal(w, r, "get event", err)
		return
	}
	d := eventData{Event: ev}
	if d.Timeline, err = c.timeline(ctx, ev, k); err != nil {
		c.internal(w, r, "event history", err)
		return
	}
	d.Payload = c.payload(ctx, ev.StreamSeq, ev.PayloadSHA256)
	c.render(w, r, http.StatusOK, "event", ev.Key, d)
}

// timeline puts everything that happened to an event in time order:
// deliveries, handler runs, replays that selected it, conflicts, refused
// messages claiming its key and its body refused under other ids.
func (c *Console) timeline(ctx context.Context, ev store.EventRecord, k envelope.Key) ([]entry, error) {
	st := c.ro.Store
	var out []entry
	deliveries, err := st.EventDeliveryHistory(ctx, k)
	if err != nil {
		return nil, err
	}
	for _, d := range deliveries {
		out = append(out, entry{At: d.ReceivedAt, Kind: "delivery", What: fmt.Sprintf("delivery answered %d %s", d.StatusCode, d.Answer),
			Detail: "instance " + d.Instance + hints(d.RetryHints)})
	}
	attempts, err := st.EventAttempts(ctx, k)
	if err != nil {
		return nil, err
	}
	for _, a := range attempts {
		next := "the last attempt"
		if a.NextAttemptAt != nil {
			next = "next attempt at " + ts(*a.NextAttemptAt)
		}
		out = append(out, entry{At: a.FailedAt, Kind: "attempt",
			What:   fmt.Sprintf("attempt %d of %d failed (%s): %s", a.Delivery, a.MaxDeliver, a.ErrorClass, short(a.Error, 300)),
			Detail: fmt.Sprintf("%s, stream seq %d", next, a.StreamSeq)})
	}
	execs, err := st.EventExecutions(ctx, k)
	if err != nil {
		return nil, err
	}
	for _, e := range execs {
		en := entry{At: e.ExecutedAt, Kind: "execution", What: "handler ran (" + e.Mode + ")",
			Detail: fmt.Sprintf("execution %s, stream seq %d", e.ID, e.StreamSeq)}
		if e.ReplayID != nil {
			en.Link = replayLink(*e.ReplayID, "")
		}
		out = append(out, en)
	}
	reps, err := st.ReplaysOfEvent(ctx, k)
	if err != nil {
		return nil, err
	}
	for _, rp := range reps {
		out = append(out, entry{At: rp.CreatedAt, Kind: "replay", What: "replay " + rp.Mode + " by " + rp.RequestedBy + " (" + rp.State + ", item " + rp.ItemState + ")",
			Detail: "reason: " + rp.Reason, Link: replayLink(rp.ID, "")})
	}
	conflicts, err := st.EventConflicts(ctx, k)
	if err != nil {
		return nil, err
	}
	for _, cf := range conflicts {
		out = append(out, entry{At: cf.DetectedAt, Kind: "conflict", What: "conflicting payload recorded",
			Detail: fmt.Sprintf("stream seq %d, sha256 %s", cf.ConflictingStreamSeq, cf.ConflictingSHA256),
			Link:   conflictLink(cf.Key, cf.ID)})
	}
	rejs, err := st.EventRejections(ctx, k)
	if err != nil {
		return nil, err
	}
	for _, rj := range rejs {
		out = append(out, entry{At: rj.RejectedAt, Kind: "rejection", What: "message refused: " + rj.Reason, Detail: rj.Detail})
	}
	bodies, err := st.EventReplayedBodies(ctx, k)
	if err != nil {
		return nil, err
	}
	for _, rj := range bodies {
		out = append(out, entry{At: rj.RejectedAt, Kind: "rejection", What: "its body refused under another event id (" + rj.Key + ")",
			Detail: rj.Detail})
	}
	if ev.ProcessedAt != nil {
		out = append(out, entry{At: *ev.ProcessedAt, Kind: "processed", What: "inbox row " + string(ev.Status)})
	}
	dispatched, err := st.DispatchAttemptsOf(ctx, k.String())
	if err != nil {
		return nil, err
	}
	for _, a := range dispatched {
		en := entry{At: a.AttemptedAt, Kind: "dispatch", Link: destinationLink(a.Destination),
			Detail: fmt.Sprintf("webhook-id %s, attempt %d, %d ms", a.MsgID, a.Attempt, a.Latency.Milliseconds())}
		answer := a.ErrorClass
		if a.StatusCode != 0 {
			answer = fmt.Sprintf("%d %s", a.StatusCode, a.ErrorClass)
		}
		switch a.Outcome {
		case store.DispatchDelivered:
			en.What = fmt.Sprintf("delivered to %s (%d)", a.Destination, a.StatusCode)
		case store.DispatchRetry:
			en.What = fmt.Sprintf("delivery to %s will be retried (%s)", a.Destination, answer)
			if a.NextAttemptAt != nil {
				en.Detail += ", next attempt at " + ts(*a.NextAttemptAt)
			}
		default:
			en.What = fmt.Sprintf("delivery to %s failed (%s)", a.Destination, answer)
		}
		out = append(out, en)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

func hints(h map[string]string) string {
	if len(h) == 0 {
		return ""
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ", retry hints:"
	for _, k := range keys {
		s += " " + k + "=" + h[k]
	}
	return s
}

// payload reads the raw body of INTAKE_IN message seq.
func (c *Console) payload(ctx context.Context, seq int64, want string) payload {
	p := payload{Seq: seq}
	if seq <= 0 {
		p.Missing = "no stream sequence recorded"
		return p
	}
	s, err := c.ro.JS.Stream(ctx, envelope.StreamIn)
	if err == nil {
		var m *jetstream.RawStreamMsg
		if m, err = s.GetMsg(ctx, uint64(seq)); err == nil {
			sum := sha256.Sum256(m.Data)
			p.SHA256 = hex.EncodeToString(sum[:])
			p.Matches = want == "" || p.SHA256 == want
			p.Text, p.JSON = pretty(m.Data)
			p.Raw = m.Data
			return p
		}
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		p.Missing = fmt.Sprintf("message %d is gone from %s (max_age or deleted)", seq, envelope.StreamIn)
	} else {
		c.log.Warn("console: read payload", "seq", seq, "err", err)
		p.Missing = fmt.Sprintf("message %d could not be read from %s", seq, envelope.StreamIn)
	}
	return p
}

// pretty indents JSON; other bodies are shown as they are.
func pretty(b []byte) (string, bool) {
	var buf bytes.Buffer
	if json.Valid(b) && json.Indent(&buf, b, "", "  ") == nil {
		return buf.String(), true
	}
	return string(b), false
}

func (d eventsData) write(w *writer, _ page) {
	f := d.Filter
	w.m(`<form method="get" action="/ui/events" class="filter" id="filter">
  <label>Integration `)
	if len(d.Integrations) == 0 {
		w.m(`<input name="integration" id="integration" value="`).t(f.Integration).m(`">`)
	} else {
		w.m(`<select name="integration" id="integration"><option value="">any</option>`)
		for _, in := range d.Integrations {
			w.m(`<option`).mif(in == f.Integration, ` selected`).m(`>`).t(in).m(`</option>`)
		}
		w.m(`</select>`)
	}
	w.m(`</label>
  <label>Tenant <input name="tenant" value="`).t(f.Tenant).m(`"></label>
  <label>Status <select name="status"><option value="">any</option>`)
	for _, st := range d.Statuses {
		w.m(`<option`).mif(st == f.Status, ` selected`).m(`>`).t(st).m(`</option>`)
	}
	w.m(`</select></label>
  <label>Type <input name="event_type" value="`).t(f.EventType).m(`"></label>
  <label>Since <input name="since" id="since" value="`).t(f.Since).m(`" placeholder="1h, 2d, 2026-01-02T15:04"></label>
  <label>Until <input name="until" value="`).t(f.Until).m(`" placeholder="UTC, or 30m ago"></label>
  <label>Key prefix <input name="key_prefix" id="key_prefix" value="`).t(f.KeyPrefix).m(`"></label>
  <button type="submit" id="search">Filter</button>
</form>
<p class="quick" id="quick">Since: `)
	for i, q := range quickRanges {
		v := url.Values{}
		for k, vs := range d.Query {
			v[k] = vs
		}
		v.Set("since", q.Since)
		w.mif(i > 0, ` · `).m(`<a href="`).u(listLink("/ui/events", v)).m(`" data-since="`).t(q.Since).m(`">`).t(q.Label).m(`</a>`)
	}
	w.m(`</p>
`)
	if d.PayloadSearch {
		w.m(`<p class="quick"><a href="/ui/search" id="search-payloads">Search payloads</a> for a JSON field's value, over a bounded window</p>
`)
	}
	eventTable(w, d.Events)
	if d.Next != "" {
		w.m(`<p><a id="next" href="`).u(nextLink("/ui/events", d.Query, d.Next)).m(`">Next page →</a></p>`)
	}
}

func eventTable(w *writer, events []store.EventRecord) {
	w.m(`<table class="list" id="events">
<thead><tr><th>First received</th><th>Key</th><th>Tenant</th><th>Type</th><th>Status</th><th>Deliveries</th><th>Conflicts</th><th>Error</th></tr></thead>
<tbody>
`)
	for _, e := range events {
		w.m(`<tr>
<td>`).t(ts(e.FirstReceivedAt)).m(`</td>
<td><a href="`).u(eventLink(e.Key)).m(`">`).t(e.Key).m(`</a></td>
<td>`).t(e.Tenant).m(`</td><td>`).t(e.EventType).m(`</td>
<td><span class="status `).t(string(e.Status)).m(`">`).t(string(e.Status)).m(`</span></td>
<td>`).n(int64(e.DeliveryCount)).m(`</td><td>`).n(int64(e.Conflicts)).m(`</td>
<td class="err">`).t(short(deref(e.Error), 120)).m(`</td>
</tr>`)
	}
	if len(events) == 0 {
		w.m(`<tr><td colspan="8" class="empty">No events match.</td></tr>`)
	}
	w.m(`
</tbody>
</table>
`)
}

func (d eventData) write(w *writer, p page) {
	e := d.Event
	w.m(`<dl class="facts">
  <dt>Status</dt><dd><span class="status `).t(string(e.Status)).m(`" id="status">`).t(string(e.Status)).m(`</span></dd>
  <dt>Integration / account / event id</dt><dd>`).t(e.Integration).m(` / `).t(e.Account).m(` / `).t(e.EventID).m(`</dd>
  <dt>Tenant</dt><dd>`).t(e.Tenant).m(`</dd>
  <dt>Type</dt><dd>`).t(e.EventType).m(`</dd>
  <dt>Deliveries / attempts</dt><dd>`)
	// A retrying event is read from its failed attempts (no inbox row,
	// whose delivery_count it would be): none counted yet, not zero.
	if e.Status == store.StatusRetrying {
		w.m(`–`)
	} else {
		w.n(int64(e.DeliveryCount))
	}
	w.m(` / <span id="attempts">`).n(int64(e.Attempts)).m(`</span>`)
	if e.MaxDeliver > 0 {
		w.m(` of `).n(int64(e.MaxDeliver))
	}
	w.m(`</dd>
  <dt>First / last received</dt><dd>`).t(ts(e.FirstReceivedAt)).m(` / `).t(ts(e.LastReceivedAt)).m(`</dd>
  <dt>Processed</dt><dd>`).t(tsp(e.ProcessedAt)).m(`</dd>
  <dt>Stream seq</dt><dd>`).n(e.StreamSeq).m(`</dd>
  <dt>Payload SHA-256</dt><dd><code id="hash">`).t(e.PayloadSHA256).m(`</code></dd>
`)
	if e.NextAttemptAt != nil {
		w.m(`  <dt>Next attempt</dt><dd id="next-attempt">`).t(ts(*e.NextAttemptAt)).m(` (the handler failed; the processor tries again then, no inbox row until it succeeds or runs out of attempts)</dd>
`)
	}
	if e.Error != nil {
		w.m(`  <dt>Error</dt><dd class="err">`).t(*e.Error).m("</dd>\n")
	}
	w.m("</dl>\n")
	if p.Operator && (e.Status == inbox.StatusFailed || e.Status == inbox.StatusQuarantined) {
		w.m(`<form method="post" action="/ui/replays/dry-run" class="inline mutate">
  <input type="hidden" name="csrf" value="`).t(p.CSRF).m(`">
  <input type="hidden" name="key" value="`).t(e.Key).m(`">
  <button type="submit" id="replay-event">Replay this event (dry run first)</button>
</form>`)
	}
	w.m(`
<h2>Timeline</h2>
<ol class="timeline" id="timeline">
`)
	for _, en := range d.Timeline {
		w.m(`<li class="`).t(en.Kind).m(`"><time>`).t(ts(en.At)).m(`</time> <b>`).t(en.Kind).m(`</b> `)
		if en.Link != "" {
			w.m(`<a href="`).u(en.Link).m(`">`).t(en.What).m(`</a>`)
		} else {
			w.t(en.What)
		}
		if en.Detail != "" {
			w.m(`<br><small>`).t(en.Detail).m(`</small>`)
		}
		w.m("</li>\n")
	}
	if len(d.Timeline) == 0 {
		w.m("<li>Nothing recorded.</li>\n")
	}
	w.m(`</ol>
<h2>Raw payload</h2>
`)
	pl := d.Payload
	if pl.Missing != "" {
		w.m(`<p class="warn">`).t(pl.Missing).m(`</p>`)
		return
	}
	w.m(`<p class="hint">INTAKE_IN message `).n(pl.Seq).m(`, SHA-256 <code>`).t(pl.SHA256).m(`</code> `)
	// A retrying event has no inbox row yet: its hash is its failed
	// attempts' record (intake.handler_attempts).
	record := markup("the inbox row")
	if e.Status == store.StatusRetrying {
		record = "the failed attempts' record"
	}
	if pl.Matches {
		w.m(`(matches `).m(record).m(`)`)
	} else {
		w.m(`<b class="warn">(differs from `).m(record).m(`)</b>`)
	}
	w.m(`
 <button type="button" class="copy" data-copy="payload">Copy</button></p>
<pre class="payload" id="payload">`).t(pl.Text).m(`</pre>`)
}
