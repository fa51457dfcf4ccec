package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

type failedData struct {
	Filter filter
	Query  url.Values
	Events []store.EventRecord
	Next   string
}

// failed is the queue of failed (or quarantined) events with their error;
// an operator selects some, or all matching the filter, for a replay.
func (c *Console) failed(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query(), c.ro.Integrations)
	if f.Status != string(inbox.StatusQuarantined) {
		f.Status = string(inbox.StatusFailed)
	}
	d := failedData{Filter: f, Query: f.query()}
	if err != nil {
		c.renderErr(w, r, "failed", "Failed and quarantined", d, err.Error())
		return
	}
	d.Events, d.Next, err = c.ro.Store.ListEvents(r.Context(), f.store(pageSize))
	if errors.Is(err, store.ErrBadCursor) {
		c.renderErr(w, r, "failed", "Failed and quarantined", d, "cursor: invalid (start again from the first page)")
		return
	}
	if err != nil {
		c.internal(w, r, "list failed events", err)
		return
	}
	c.render(w, r, http.StatusOK, "failed", "Failed and quarantined", d)
}

// replayForm is a replay as the console's forms carry it: the selector as
// JSON (decoded strictly, as the API decodes it), the mode and the reason.
type replayForm struct {
	Selector     apiclient.Selector
	SelectorJSON string
	Mode         string
	Reason       string
}

// readSelector takes the selector from a form: "selector" (JSON, from a
// dry run or a reconcile's fix), the checked "key"s, or "all" with the
// failed page's filter.
func readSelector(r *http.Request) (apiclient.Selector, error) {
	var s apiclient.Selector
	if raw := r.PostForm.Get("selector"); raw != "" {
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return s, fmt.Errorf("selector: %w", err)
		}
		return s, nil
	}
	if r.PostForm.Get("all") != "" {
		s = apiclient.Selector{Status: r.PostForm.Get("status"), Integration: r.PostForm.Get("integration"),
			Tenant: r.PostForm.Get("tenant"), EventType: r.PostForm.Get("event_type")}
		if s.Status == "" {
			return s, errors.New("status: required to replay all matching")
		}
		return s, nil
	}
	s.Keys = r.PostForm["key"]
	if len(s.Keys) == 0 {
		return s, errors.New("select at least one event, or all matching the filter")
	}
	return s, nil
}

type dryRunData struct {
	Replay      store.Replay
	Form        replayForm
	Modes       []string
	DefaultRate int
	MaxRate     int
}

// dryRun plans the replay and shows what it would do; nothing is published.
// The dry run is recorded in the audit log, as the API records it.
func (c *Console) dryRun(w http.ResponseWriter, r *http.Request) {
	sel, err := readSelector(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	form := replayForm{Selector: sel, Mode: r.PostForm.Get("mode"), Reason: r.PostForm.Get("reason")}
	if form.Mode == "" {
		form.Mode = string(inbox.ReplayExact)
	}
	c.plan(w, r, form, http.StatusOK, "")
}

// dryRunReason is the audit reason of a console dry run in mode reexecute
// (the replayer requires one): the operator gives the real one to confirm.
const dryRunReason = "console dry run (the reason is asked at confirm)"

func planReason(form replayForm) string {
	if form.Reason == "" && form.Mode == string(inbox.ReplayReexecute) {
		return dryRunReason
	}
	return form.Reason
}

func (c *Console) plan(w http.ResponseWriter, r *http.Request, form replayForm, code int, msg string) {
	dry := true
	rep, err := c.rp.Replay(r.Context(), sessionFrom(r.Context()).caller.Name,
		apiclient.ReplayRequest{Selector: form.Selector, Mode: inbox.ReplayMode(form.Mode), DryRun: &dry, Reason: planReason(form)})
	if c.replayErr(w, r, err) {
		return
	}
	b, _ := json.Marshal(form.Selector)
	form.SelectorJSON = string(b)
	d := dryRunData{Replay: rep, Form: form, Modes: []string{string(inbox.ReplayExact), string(inbox.ReplayReexecute)},
		DefaultRate: c.ro.DefaultRate, MaxRate: c.ro.MaxRate}
	s := sessionFrom(r.Context())
	c.write(w, code, page{Title: "Replay: dry run", Nav: "dryrun", User: s.caller, CSRF: s.csrf(), Operator: s.operator(), Data: d, Error: msg})
}

// replayErr answers a refused replay as the API would (400, 422).
func (c *Console) replayErr(w http.ResponseWriter, r *http.Request, err error) bool {
	var re *replayer.RequestError
	switch {
	case err == nil:
		return false
	case errors.As(err, &re):
		c.fail(w, r, http.StatusBadRequest, re.Error())
	case errors.Is(err, replayer.ErrTooMany):
		c.fail(w, r, http.StatusUnprocessableEntity, fmt.Sprintf("The selector matches more than %d events: narrow it or split the replay.", c.ro.MaxMatched))
	default:
		c.internal(w, r, "replay", err)
	}
	return true
}

// startReplay starts the replay a dry run showed; the console requires a
// reason for every replay (the API only for reexecute).
func (c *Console) startReplay(w http.ResponseWriter, r *http.Request) {
	sel, err := readSelector(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	form := replayForm{Selector: sel, Mode: r.PostForm.Get("mode"), Reason: strings.TrimSpace(r.PostForm.Get("reason"))}
	rate := 0
	if s := r.PostForm.Get("rate"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			c.plan(w, r, form, http.StatusBadRequest, "rate: not a positive number of events per second: "+strconv.Quote(s))
			return
		}
		rate = n
	}
	if form.Reason == "" {
		c.plan(w, r, form, http.StatusBadRequest, "reason: required — say why this replay runs (it goes in the audit log)")
		return
	}
	dry := false
	rep, err := c.rp.Replay(r.Context(), sessionFrom(r.Context()).caller.Name,
		apiclient.ReplayRequest{Selector: sel, Mode: inbox.ReplayMode(form.Mode), DryRun: &dry, Reason: form.Reason, Rate: rate})
	if c.replayErr(w, r, err) {
		return
	}
	http.Redirect(w, r, Prefix+"/replays/"+rep.ID, http.StatusSeeOther)
}

func (c *Console) cancel(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	_, _, err := c.rp.Cancel(r.Context(), id, sessionFrom(r.Context()).caller.Name)
	if errors.Is(err, store.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "No such replay.")
		return
	}
	if err != nil {
		c.internal(w, r, "cancel replay", err)
		return
	}
	http.Redirect(w, r, Prefix+"/replays/"+id, http.StatusSeeOther)
}

// approve lets a replay awaiting approval publish: an operator other than
// its requester (the Replayer refuses the requester: 403 here).
func (c *Console) approve(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	_, _, err := c.rp.Approve(r.Context(), id, sessionFrom(r.Context()).caller.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.fail(w, r, http.StatusNotFound, "No such replay.")
	case errors.Is(err, store.ErrSameOperator):
		c.fail(w, r, http.StatusForbidden, "You requested this replay: another operator must approve it.")
	case err != nil:
		c.internal(w, r, "approve replay", err)
	default:
		http.Redirect(w, r, Prefix+"/replays/"+id, http.StatusSeeOther)
	}
}

// replayFilter is the audit log's query: the fields of GET /api/v1/replays.
type replayFilter struct {
	Mode, State, RequestedBy, DryRuns string
	Since, Until                      string // as typed
	Cursor                            string
	since, until                      time.Time
}

func parseReplayFilter(v url.Values) (replayFilter, error) {
	f := replayFilter{Mode: v.Get("mode"), State: v.Get("state"), RequestedBy: v.Get("requested_by"),
		DryRuns: v.Get("dry_runs"), Since: v.Get("since"), Until: v.Get("until"), Cursor: v.Get("cursor")}
	for _, c := range []struct {
		name, v string
		allowed []string
	}{{"mode", f.Mode, store.ReplayModes}, {"state", f.State, store.ReplayStates}, {"dry_runs", f.DryRuns, store.DryRunChoices}} {
		if err := checkChoice(c.name, c.v, c.allowed); err != nil {
			return f, err
		}
	}
	var err error
	if f.since, err = parseTime("since", f.Since); err != nil {
		return f, err
	}
	f.until, err = parseTime("until", f.Until)
	return f, err
}

func (f replayFilter) query() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"mode": f.Mode, "state": f.State, "requested_by": f.RequestedBy,
		"dry_runs": f.DryRuns, "since": f.Since, "until": f.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

type replaysData struct {
	Filter  replayFilter
	Query   url.Values
	Replays []store.Replay
	Next    string
}

// dryRunChoices label the audit log's dry-run filter.
var dryRunChoices = []struct{ Value, Label string }{
	{"", "left out"}, {store.DryRunsInclude, "included"}, {store.DryRunsOnly, "only dry runs"}}

// replays is the audit log; dry runs are left out unless asked for, as the
// API leaves them out.
func (c *Console) replays(w http.ResponseWriter, r *http.Request) {
	f, err := parseReplayFilter(r.URL.Query())
	d := replaysData{Filter: f, Query: f.query()}
	if err != nil {
		c.renderErr(w, r, "replays", "Replays", d, err.Error())
		return
	}
	d.Replays, d.Next, err = c.ro.Store.ListReplays(r.Context(), store.ReplayFilter{Mode: f.Mode, State: f.State,
		RequestedBy: f.RequestedBy, DryRuns: f.DryRuns, Since: f.since, Until: f.until, Limit: pageSize, Cursor: f.Cursor})
	if errors.Is(err, store.ErrBadCursor) {
		c.renderErr(w, r, "replays", "Replays", d, "cursor: invalid (start again from the first page)")
		return
	}
	if err != nil {
		c.internal(w, r, "list replays", err)
		return
	}
	c.render(w, r, http.StatusOK, "replays", "Replays", d)
}

type replayData struct {
	Replay   store.Replay
	Selector string
	Total    int64 // publishable: matched minus missing
	Percent  int64
	// Results: what became of the copies (nil for a dry run or a
	// redelivery, or when they could not be read: ResultsError).
	Results      *apiclient.ReplayResults
	ResultsError string
}

// replay shows one replay; ?fragment=progress answers only its progress
// block (console.js polls it while the replay runs).
func (c *Console) replay(w http.ResponseWriter, r *http.Request) {
	rep, err := c.ro.Store.GetReplay(r.Context(), chi.URLParam(r, "id"))
	if errors.Is(err, store.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "No such replay.")
		return
	}
	if err != nil {
		c.internal(w, r, "get replay", err)
		return
	}
	d := replayData{Replay: rep, Total: rep.Matched - rep.Outcomes[replayer.Missing]}
	if d.Total > 0 {
		d.Percent = min(100, rep.Published*100/d.Total)
	} else if rep.State != store.ReplayRunning {
		d.Percent = 100
	}
	var buf bytes.Buffer
	if json.Indent(&buf, rep.Selector, "", "  ") == nil {
		d.Selector = buf.String()
	}
	if r.URL.Query().Get("fragment") == "progress" {
		s := sessionFrom(r.Context())
		var out writer
		d.progress(&out, page{User: s.caller, CSRF: s.csrf(), Operator: s.operator()})
		send(w, http.StatusOK, &out)
		return
	}
	if d.Results, err = c.rp.Results(r.Context(), rep); err != nil {
		c.log.Warn("console: replay results", "replay_id", rep.ID, "err", err)
		d.ResultsError = "What became of the copies could not be read (see the replayer's log)."
	}
	c.render(w, r, http.StatusOK, "replay", "Replay "+rep.ID, d)
}

func (d failedData) write(w *writer, p page) {
	f, op := d.Filter, p.Operator
	w.m(`<p><a id="by-cause" href="/ui/failures">Grouped by cause →</a> (work items: counts, first and last seen, resolve)</p>
`)
	w.m(`<form method="get" action="/ui/failed" class="filter">
  <label>Status <select name="status"><option`).mif(f.Status == string(inbox.StatusFailed), ` selected`).m(`>failed</option><option`).
		mif(f.Status == string(inbox.StatusQuarantined), ` selected`).m(`>quarantined</option></select></label>
  <label>Integration <input name="integration" value="`).t(f.Integration).m(`"></label>
  <label>Tenant <input name="tenant" value="`).t(f.Tenant).m(`"></label>
  <label>Type <input name="event_type" value="`).t(f.EventType).m(`"></label>
  <label>Key prefix <input name="key_prefix" value="`).t(f.KeyPrefix).m(`"></label>
  <button type="submit">Filter</button>
</form>
`)
	if op {
		w.m(`<form method="post" action="/ui/replays/dry-run" id="replay-form" class="mutate">
<input type="hidden" name="csrf" value="`).t(p.CSRF).m(`">
<input type="hidden" name="status" value="`).t(f.Status).m(`">
<input type="hidden" name="integration" value="`).t(f.Integration).m(`">
<input type="hidden" name="tenant" value="`).t(f.Tenant).m(`">
<input type="hidden" name="event_type" value="`).t(f.EventType).m(`">
<p><button type="submit" id="dry-run-selected">Replay selected (dry run)</button>
`)
		if f.KeyPrefix != "" {
			w.m(`<span class="hint">(a key prefix is no replay selector: select the rows)</span>`)
		} else {
			w.m(`<button type="submit" name="all" value="1" id="dry-run-all">Replay all `).t(f.Status)
			if f.Integration != "" {
				w.m(` of `).t(f.Integration)
			}
			if f.Tenant != "" {
				w.m(` for `).t(f.Tenant)
			}
			if f.EventType != "" {
				w.m(` of type `).t(f.EventType)
			}
			w.m(` (dry run)</button>`)
		}
		w.m(`
<label>Mode <select name="mode"><option>exact</option><option>reexecute</option></select></label></p>
`)
	}
	w.m(`<table class="list" id="failed">
<thead><tr>`).mif(op, `<th><input type="checkbox" id="select-all" title="select all on this page"></th>`).
		m(`<th>Last received</th><th>Key</th><th>Tenant</th><th>Type</th><th>Status</th><th>Attempts</th><th>Error</th></tr></thead>
<tbody>
`)
	for _, e := range d.Events {
		w.m("<tr>\n")
		if op {
			w.m(`<td><input type="checkbox" name="key" value="`).t(e.Key).m("\"></td>\n")
		}
		w.m(`<td>`).t(ts(e.LastReceivedAt)).m(`</td>
<td><a href="`).u(eventLink(e.Key)).m(`">`).t(e.Key).m(`</a></td><td>`).t(e.Tenant).m(`</td><td>`).t(e.EventType).m(`</td>
<td><span class="status `).t(string(e.Status)).m(`">`).t(string(e.Status)).m(`</span></td><td>`).n(int64(e.Attempts)).m(`</td>
<td class="err">`).t(deref(e.Error)).m(`</td>
</tr>`)
	}
	if len(d.Events) == 0 {
		w.m(`<tr><td colspan="8" class="empty">Nothing `).t(f.Status).m(`.</td></tr>`)
	}
	w.m(`
</tbody></table>
`)
	if op {
		w.m("</form>\n")
	}
	if d.Next != "" {
		w.m(`<p><a href="`).u(nextLink("/ui/failed", d.Query, d.Next)).m(`">Next page →</a></p>`)
	}
}

// outcomes are a replay's (or a dry run's) counts: rows of tenant,
// integration, type, outcome and events.
func outcomes(w *writer, counts []store.OutcomeCount) {
	for _, oc := range counts {
		w.m(`<tr><td>`).t(oc.Tenant).m(`</td><td>`).t(oc.Integration).m(`</td><td>`).t(oc.EventType).m(`</td><td>`).
			t(oc.Outcome).m(`</td><td>`).n(oc.Count).m("</td></tr>\n")
	}
}

func (d dryRunData) write(w *writer, p page) {
	rp, form := d.Replay, d.Form
	w.m(`<p>Dry run <a href="`).u(replayLink(rp.ID, "")).m(`">`).t(rp.ID).m(`</a> (recorded in the audit log): nothing was published.</p>
<dl class="facts">
  <dt>Selector</dt><dd><code>`).t(form.SelectorJSON).m(`</code></dd>
  <dt>Mode</dt><dd>`).t(form.Mode).m(`</dd>
  <dt>Matched</dt><dd id="matched">`).n(rp.Matched).m(`</dd>
</dl>
<h2>Predicted outcomes</h2>
<table class="list" id="outcomes">
<thead><tr><th>Tenant</th><th>Integration</th><th>Type</th><th>Outcome</th><th>Events</th></tr></thead>
<tbody>`)
	outcomes(w, rp.Counts)
	if len(rp.Counts) == 0 {
		w.m(`<tr><td colspan="5" class="empty">Nothing matches.</td></tr>`)
	}
	w.m("</tbody></table>\n")
	if len(rp.Sample) > 0 {
		w.m(`<p class="hint">Sample: `).t(strings.Join(rp.Sample, ", ")).m("</p>\n")
	}
	if len(rp.UnknownKeys) > 0 {
		w.m(`<p class="err" id="unknown-keys">`).n(int64(len(rp.UnknownKeys))).
			m(` of the keys have no inbox row and no refusal record, so nothing to replay by key: check the integration, account and event id, or search for the event id alone; an event never processed is replayed by range (Reconcile). `).
			t(strings.Join(rp.UnknownKeys, ", ")).m("</p>\n")
	}
	if !p.Operator || rp.Matched == 0 {
		return
	}
	w.m(`<form method="post" action="/ui/replays" class="confirm mutate" id="confirm-form">
  <input type="hidden" name="csrf" value="`).t(p.CSRF).m(`">
  <input type="hidden" name="selector" value="`).t(form.SelectorJSON).m(`">
  <input type="hidden" name="mode" value="`).t(form.Mode).m(`">
  <label>Rate <input type="number" name="rate" id="rate" min="1" max="`).n(int64(d.MaxRate)).m(`" placeholder="`).n(int64(d.DefaultRate)).
		m(`"> events/s (default `).n(int64(d.DefaultRate)).m(`)</label>
  <label>Reason (required, goes in the audit log)<br><textarea name="reason" id="reason" rows="2" cols="60" required>`).t(form.Reason).m(`</textarea></label>
  <p><button type="submit" class="primary" id="confirm">Confirm: replay `).n(rp.Matched).m(` event(s), `).t(form.Mode).m(`</button> <a href="/ui/failed">Cancel</a></p>
</form>
`)
	for _, mode := range d.Modes {
		if mode == form.Mode {
			continue
		}
		w.m(`<form method="post" action="/ui/replays/dry-run" class="inline mutate">
<input type="hidden" name="csrf" value="`).t(p.CSRF).m(`"><input type="hidden" name="selector" value="`).t(form.SelectorJSON).m(`">
<input type="hidden" name="mode" value="`).t(mode).m(`"><button type="submit">Dry-run as `).t(mode).m(` instead</button></form>`)
	}
}

func (d replaysData) write(w *writer, _ page) {
	f := d.Filter
	w.m(`<form method="get" action="/ui/replays" class="filter" id="filter">
  <label>Mode <select name="mode" id="mode"><option value="">any</option>`)
	for _, m := range store.ReplayModes {
		w.m(`<option`).mif(m == f.Mode, ` selected`).m(`>`).t(m).m(`</option>`)
	}
	w.m(`</select></label>
  <label>State <select name="state" id="state"><option value="">any</option>`)
	for _, st := range store.ReplayStates {
		w.m(`<option`).mif(st == f.State, ` selected`).m(`>`).t(st).m(`</option>`)
	}
	w.m(`</select></label>
  <label>Requested by <input name="requested_by" id="requested_by" value="`).t(f.RequestedBy).m(`"></label>
  <label>Dry runs <select name="dry_runs" id="dry_runs">`)
	for _, c := range dryRunChoices {
		w.m(`<option value="`).t(c.Value).m(`"`).mif(c.Value == f.DryRuns || (c.Value == "" && f.DryRuns == store.DryRunsExclude), ` selected`).
			m(`>`).t(c.Label).m(`</option>`)
	}
	w.m(`</select></label>
  <label>Since <input name="since" id="since" value="`).t(f.Since).m(`" placeholder="1h, 2d, 2026-01-02T15:04"></label>
  <label>Until <input name="until" value="`).t(f.Until).m(`" placeholder="UTC, or 30m ago"></label>
  <button type="submit" id="search">Filter</button>
</form>
<table class="list" id="replays">
<thead><tr><th>Created</th><th>Who</th><th>Why</th><th>Mode</th><th>Dry run</th><th>Matched</th><th>Published</th><th>State</th><th></th></tr></thead>
<tbody>
`)
	for _, rp := range d.Replays {
		w.m(`<tr>
<td>`).t(ts(rp.CreatedAt)).m(`</td><td>`).t(rp.RequestedBy).m(`</td><td>`).t(rp.Reason).m(`</td><td>`).t(rp.Mode).m(`</td><td>`).
			mif(rp.DryRun, `yes`).m(`</td>
<td>`).n(rp.Matched).m(`</td><td>`).n(rp.Published).m(`</td><td><span class="status `).t(rp.State).m(`">`).t(rp.State).m(`</span></td>
<td><a href="`).u(replayLink(rp.ID, "")).m(`">`).t(short(rp.ID, 8)).m(`</a></td>
</tr>`)
	}
	if len(d.Replays) == 0 {
		w.m(`<tr><td colspan="9" class="empty">No replays match`).mif(f.DryRuns == "" || f.DryRuns == store.DryRunsExclude, ` (dry runs are left out)`).m(`.</td></tr>`)
	}
	w.m(`
</tbody></table>
`)
	if d.Next != "" {
		w.m(`<p><a id="next" href="`).u(nextLink("/ui/replays", d.Query, d.Next)).m(`">Next page →</a></p>`)
	}
}

func (d replayData) write(w *writer, p page) {
	rp := d.Replay
	if rp.State == store.ReplayRunning {
		w.m(`<noscript><meta http-equiv="refresh" content="2"></noscript>`)
	}
	d.progress(w, p)
	w.m(`<dl class="facts">
  <dt>Requested by</dt><dd id="requested-by">`).t(rp.RequestedBy).m(`</dd>
  <dt>Reason</dt><dd id="reason">`).t(rp.Reason).m(`</dd>
  <dt>Mode</dt><dd>`).t(rp.Mode).mif(rp.DryRun, ` (dry run)`).m(`</dd>
  <dt>Created / finished</dt><dd>`).t(ts(rp.CreatedAt)).m(` / `).t(tsp(rp.FinishedAt)).m(`</dd>
  <dt>Rate</dt><dd>`).n(int64(rp.Rate)).m(`/s</dd>
  <dt>Selector</dt><dd><pre>`).t(d.Selector).m(`</pre></dd>
`)
	if rp.CancelledBy != nil {
		w.m(`  <dt>Cancelled by</dt><dd>`).t(*rp.CancelledBy).m("</dd>\n")
	}
	if rp.ApprovedBy != nil {
		w.m(`  <dt>Approved by</dt><dd id="approved-by">`).t(*rp.ApprovedBy).m(` at `).t(tsp(rp.ApprovedAt)).m("</dd>\n")
	}
	if rp.Error != nil {
		w.m(`  <dt>Error</dt><dd class="err">`).t(*rp.Error).m("</dd>\n")
	}
	w.m(`</dl>
`)
	d.results(w)
	w.m(`<h2>Predicted outcomes</h2>
<table class="list"><thead><tr><th>Tenant</th><th>Integration</th><th>Type</th><th>Outcome</th><th>Events</th></tr></thead>
<tbody>`)
	outcomes(w, rp.Counts)
	w.m("</tbody></table>\n")
	if len(rp.Sample) > 0 {
		w.m(`<p class="hint">Sample: `)
		for _, k := range rp.Sample {
			w.m(`<a href="`).u(eventLink(k)).m(`">`).t(k).m(`</a> `)
		}
		w.m("</p>\n")
	}
}

// progress is the block console.js polls (?fragment=progress) while the
// replay runs.
func (d replayData) progress(w *writer, p page) {
	rp := d.Replay
	w.m(`
<div id="progress" data-state="`).t(rp.State).m(`">
<p>State <span class="status `).t(rp.State).m(`" id="state">`).t(rp.State).m(`</span> ·
 published <span id="published">`).n(rp.Published).m(`</span> of `).n(d.Total).m(` (matched `).n(rp.Matched).m(`)
 <progress max="100" value="`).n(d.Percent).m(`">`).n(d.Percent).m(`%</progress></p>
`)
	if rp.State == store.ReplayAwaitingApproval {
		w.m(`<p class="hint" id="awaiting">This re-execution selects more events than api.replays.reexecute_approval_above:
 it publishes nothing until an operator other than `).t(rp.RequestedBy).m(` approves it.</p>
`)
		if p.Operator && p.User.Name != rp.RequestedBy {
			w.m(`<form method="post" action="`).u(replayLink(rp.ID, "/approve")).m(`" class="mutate"><input type="hidden" name="csrf" value="`).t(p.CSRF).m(`">
<button type="submit" class="primary" id="approve">Approve: re-execute `).n(d.Total).m(` event(s)</button></form>`)
		}
	}
	if p.Operator && (rp.State == store.ReplayRunning || rp.State == store.ReplayAwaitingApproval) {
		w.m(`<form method="post" action="`).u(replayLink(rp.ID, "/cancel")).m(`" class="mutate"><input type="hidden" name="csrf" value="`).t(p.CSRF).m(`">
<button type="submit" class="danger" id="cancel">Cancel replay</button></form>`)
	}
	w.m(`
</div>
`)
}

// resultOrder is the order the results table shows: what was done, what
// was not, what is still to come.
var resultOrder = []string{store.ResultProcessed, store.ResultFailedAgain, store.ResultDeduplicated, store.ResultStale,
	store.ResultRejected, store.ResultConflict, store.ResultInFlight, store.ResultUnpublished, store.ResultMissing, store.ResultNoRecord}

// results writes what became of the copies beside what the plan predicted:
// one row per predicted outcome, one column per result that occurred.
func (d replayData) results(w *writer) {
	if d.ResultsError != "" {
		w.m(`<h2>Results</h2><p class="warn">`).t(d.ResultsError).m("</p>\n")
		return
	}
	res := d.Results
	if res == nil {
		return
	}
	var cols []string
	for _, r := range resultOrder {
		if res.Counts[r] > 0 {
			cols = append(cols, r)
		}
	}
	predicted := map[string]map[string]int64{}
	var rows []string
	for _, c := range res.ByPrediction {
		if predicted[c.Predicted] == nil {
			predicted[c.Predicted] = map[string]int64{}
			rows = append(rows, c.Predicted)
		}
		predicted[c.Predicted][c.Result] += c.Count
	}
	w.m(`<h2>Results</h2>
<p class="hint">What the processor did with each copy, read from its records now (settled up to INTAKE_IN seq `).un(res.Settled).
		m(`, the processor's ack floor; a copy above it is in flight), beside what the plan predicted.</p>
<table class="list" id="results">
<thead><tr><th>Predicted</th>`)
	for _, c := range cols {
		w.m(`<th>`).t(strings.ReplaceAll(c, "_", " ")).m(`</th>`)
	}
	w.m("</tr></thead>\n<tbody>\n")
	for _, p := range rows {
		w.m(`<tr><td>`).t(p).m(`</td>`)
		for _, c := range cols {
			w.m(`<td data-result="`).t(c).m(`">`)
			if n := predicted[p][c]; n > 0 {
				w.n(n)
			}
			w.m(`</td>`)
		}
		w.m("</tr>\n")
	}
	w.m(`<tr class="total"><td><b>total</b></td>`)
	for _, c := range cols {
		w.m(`<td id="result-`).t(c).m(`"><b>`).n(res.Counts[c]).m(`</b></td>`)
	}
	w.m("</tr>\n")
	if len(rows) == 0 {
		w.m(`<tr><td class="empty">Nothing selected.</td></tr>`)
	}
	w.m("</tbody></table>\n")
	if res.Counts[store.ResultInFlight] > 0 {
		w.m(`<p class="hint" id="results-pending">Some copies are not settled yet: <a href="`).u(replayLink(d.Replay.ID, "")).m(`">read again</a>.</p>`)
	}
	if n := res.Counts[store.ResultRejected]; n > 0 {
		w.m(`<p><a id="rejections-link" href="`).u(listLink("/ui/rejections", url.Values{"replay_id": {d.Replay.ID}})).m(`">Why the rejected copies (`).n(n).
			m(`) were refused</a></p>`)
	}
}
