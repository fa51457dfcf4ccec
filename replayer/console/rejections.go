package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/intakehq/intake/pkg/store"
)

// rejectionFilter is the rejections page's query: the fields of GET
// /api/v1/rejections, times also as the events page takes them.
type rejectionFilter struct {
	Integration, Tenant, Reason, ReplayID, KeyPrefix string
	Since, Until, FromSeq, ToSeq                     string // as typed
	Cursor                                           string
	since, until                                     time.Time
	fromSeq, toSeq                                   uint64
}

// parseRejectionFilter reads the query. The integration is not checked
// against the config (as the API does not): an unknown_integration
// rejection names one the config lacks.
func parseRejectionFilter(v url.Values) (rejectionFilter, error) {
	f := rejectionFilter{Integration: v.Get("integration"), Tenant: v.Get("tenant"), Reason: v.Get("reason"),
		ReplayID: v.Get("replay_id"), KeyPrefix: v.Get("key_prefix"), Since: v.Get("since"), Until: v.Get("until"),
		FromSeq: v.Get("from_seq"), ToSeq: v.Get("to_seq"), Cursor: v.Get("cursor")}
	if err := checkChoice("reason", f.Reason, store.RejectReasons); err != nil {
		return f, err
	}
	var err error
	if f.since, err = parseTime("since", f.Since); err != nil {
		return f, err
	}
	if f.until, err = parseTime("until", f.Until); err != nil {
		return f, err
	}
	for _, s := range []struct {
		name, v string
		to      *uint64
	}{{"from_seq", f.FromSeq, &f.fromSeq}, {"to_seq", f.ToSeq, &f.toSeq}} {
		if s.v == "" {
			continue
		}
		n, perr := strconv.ParseUint(s.v, 10, 64)
		if perr != nil {
			return f, errors.New(s.name + ": not a non-negative integer: " + strconv.Quote(s.v))
		}
		*s.to = n
	}
	return f, nil
}

// query is the filter without the cursor, for links to other pages of it.
func (f rejectionFilter) query() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"integration": f.Integration, "tenant": f.Tenant, "reason": f.Reason,
		"replay_id": f.ReplayID, "key_prefix": f.KeyPrefix, "since": f.Since, "until": f.Until,
		"from_seq": f.FromSeq, "to_seq": f.ToSeq} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

type rejectionsData struct {
	Filter       rejectionFilter
	Query        url.Values
	Rejections   []store.Rejection
	Next         string
	Reasons      []string
	Integrations []string // the config's, offered as suggestions
}

// rejections lists the messages the processor refused before the inbox
// decision (GET /api/v1/rejections): what each claimed and why it was
// refused.
func (c *Console) rejections(w http.ResponseWriter, r *http.Request) {
	f, err := parseRejectionFilter(r.URL.Query())
	d := rejectionsData{Filter: f, Query: f.query(), Reasons: store.RejectReasons, Integrations: c.ro.Integrations}
	if err != nil {
		c.renderErr(w, r, "rejections", "Rejected messages", d, err.Error())
		return
	}
	d.Rejections, d.Next, err = c.ro.Store.ListRejections(r.Context(), store.RejectionFilter{Integration: f.Integration,
		Tenant: f.Tenant, Reason: f.Reason, ReplayID: f.ReplayID, Since: f.since, Until: f.until, FromSeq: f.fromSeq,
		ToSeq: f.toSeq, KeyPrefix: f.KeyPrefix, Limit: pageSize, Cursor: f.Cursor})
	if errors.Is(err, store.ErrBadCursor) {
		c.renderErr(w, r, "rejections", "Rejected messages", d, "cursor: invalid (start again from the first page)")
		return
	}
	if err != nil {
		c.internal(w, r, "list rejections", err)
		return
	}
	c.render(w, r, http.StatusOK, "rejections", "Rejected messages", d)
}

func (d rejectionsData) write(w *writer, _ page) {
	f := d.Filter
	w.m(`<p class="hint">Messages on INTAKE_IN the processor refused before the inbox decision (a forged or malformed envelope, a replay copy no recorded replay covers, a body the replay guard knows under another id): they have no inbox row on purpose, and none is lost silently.</p>
<form method="get" action="/ui/rejections" class="filter" id="filter">
  <label>Integration <input name="integration" id="integration" list="integrations" value="`).t(f.Integration).m(`"></label>
  <datalist id="integrations">`)
	for _, in := range d.Integrations {
		w.m(`<option value="`).t(in).m(`"></option>`)
	}
	w.m(`</datalist>
  <label>Tenant <input name="tenant" value="`).t(f.Tenant).m(`"></label>
  <label>Reason <select name="reason" id="reason"><option value="">any</option>`)
	for _, rs := range d.Reasons {
		w.m(`<option`).mif(rs == f.Reason, ` selected`).m(`>`).t(rs).m(`</option>`)
	}
	w.m(`</select></label>
  <label>Replay id <input name="replay_id" id="replay_id" value="`).t(f.ReplayID).m(`"></label>
  <label>Since <input name="since" id="since" value="`).t(f.Since).m(`" placeholder="1h, 2d, 2026-01-02T15:04"></label>
  <label>Until <input name="until" value="`).t(f.Until).m(`" placeholder="UTC, or 30m ago"></label>
  <label>From seq <input name="from_seq" id="from_seq" value="`).t(f.FromSeq).m(`"></label>
  <label>To seq <input name="to_seq" id="to_seq" value="`).t(f.ToSeq).m(`"></label>
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
		w.mif(i > 0, ` · `).m(`<a href="`).u(listLink("/ui/rejections", v)).m(`" data-since="`).t(q.Since).m(`">`).t(q.Label).m(`</a>`)
	}
	w.m(`</p>
<table class="list" id="rejections">
<thead><tr><th>Rejected</th><th>Reason</th><th>Key (as claimed)</th><th>Tenant</th><th>Type</th><th>Stream seq</th><th>Replay</th><th>Detail</th></tr></thead>
<tbody>
`)
	// The claimed key is text, not a link: a refused message made no inbox
	// row, so it names an event that may not exist.
	for _, rj := range d.Rejections {
		w.m(`<tr>
<td>`).t(ts(rj.RejectedAt)).m(`</td><td><span class="status rejected">`).t(rj.Reason).m(`</span></td>
<td>`).t(rj.Key)
		if rj.OriginalKey != "" {
			w.m(`<br><small>body of <a href="`).u(eventLink(rj.OriginalKey)).m(`">`).t(rj.OriginalKey).m(`</a></small>`)
		}
		w.m(`</td><td>`).t(rj.Tenant).m(`</td><td>`).t(rj.EventType).m(`</td><td>`).n(rj.StreamSeq).m(`</td><td>`)
		if rj.ReplayID != nil {
			// The id is what the message claimed: it may name no replay
			// (the replay page then says so).
			w.m(`<a href="`).u(replayLink(*rj.ReplayID, "")).m(`">`).t(short(*rj.ReplayID, 8)).m(`</a> `).t(deref(rj.ReplayMode))
		}
		w.m(`</td><td class="err">`).t(short(rj.Detail, 160)).m(`</td>
</tr>`)
	}
	if len(d.Rejections) == 0 {
		w.m(`<tr><td colspan="8" class="empty">No rejected messages match.</td></tr>`)
	}
	w.m(`
</tbody></table>
`)
	if d.Next != "" {
		w.m(`<p><a id="next" href="`).u(nextLink("/ui/rejections", d.Query, d.Next)).m(`">Next page →</a></p>`)
	}
}
