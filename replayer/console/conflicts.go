package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/intakehq/intake/internal/jsondiff"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

type conflictsData struct {
	Filter    filter
	Query     url.Values
	Conflicts []store.Conflict
	Next      string
}

func (c *Console) conflicts(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query(), c.ro.Integrations)
	d := conflictsData{Filter: f, Query: f.query()}
	if err != nil {
		c.renderErr(w, r, "conflicts", "Conflicts", d, err.Error())
		return
	}
	d.Conflicts, d.Next, err = c.ro.Store.ListConflicts(r.Context(), store.ConflictFilter{Integration: f.Integration,
		Tenant: f.Tenant, Since: f.since, Until: f.until, KeyPrefix: f.KeyPrefix, Limit: pageSize, Cursor: f.Cursor})
	if errors.Is(err, store.ErrBadCursor) {
		c.renderErr(w, r, "conflicts", "Conflicts", d, "cursor: invalid (start again from the first page)")
		return
	}
	if err != nil {
		c.internal(w, r, "list conflicts", err)
		return
	}
	c.render(w, r, http.StatusOK, "conflicts", "Conflicts", d)
}

type conflictData struct {
	Conflict              store.Conflict
	Original, Conflicting payload
	Diff                  []diffRow
	Changed               int
	// Structural: both payloads are JSON, diffed with sorted keys; Fields
	// are the paths whose values differ.
	Structural bool
	Fields     []jsondiff.Change
}

// conflict shows one conflict's two payloads side by side, diffed as
// pretty-printed JSON lines.
func (c *Console) conflict(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	k, ok := envelope.ParseKey(q.Get("key"))
	id, err := strconv.ParseInt(q.Get("id"), 10, 64)
	if !ok || err != nil {
		c.fail(w, r, http.StatusBadRequest, "key and id: give the event's scoped key and the conflict's id")
		return
	}
	list, err := c.ro.Store.EventConflicts(r.Context(), k)
	if err != nil {
		c.internal(w, r, "event conflicts", err)
		return
	}
	d := conflictData{}
	found := false
	for _, cf := range list {
		if cf.ID == id {
			d.Conflict, found = cf, true
		}
	}
	if !found {
		c.fail(w, r, http.StatusNotFound, "No conflict "+q.Get("id")+" for "+k.String()+".")
		return
	}
	d.Original = c.payload(r.Context(), d.Conflict.OriginalStreamSeq, d.Conflict.OriginalSHA256)
	d.Conflicting = c.payload(r.Context(), d.Conflict.ConflictingStreamSeq, d.Conflict.ConflictingSHA256)
	if d.Original.Missing == "" && d.Conflicting.Missing == "" {
		left, right := d.Original.Text, d.Conflicting.Text
		lv, lt, lok := jsondiff.Canonical(d.Original.Raw)
		rv, rt, rok := jsondiff.Canonical(d.Conflicting.Raw)
		if lok && rok {
			// Both JSON: compared by field, keys sorted, so that a field the
			// sender moved is not shown as a change.
			left, right, d.Structural = lt, rt, true
			d.Fields = jsondiff.Changes(lv, rv, "$", nil)
		}
		d.Diff = diffLines(left, right)
		for _, row := range d.Diff {
			if row.Op != "same" {
				d.Changed++
			}
		}
	}
	c.render(w, r, http.StatusOK, "conflict", "Conflict on "+k.String(), d)
}

func (d conflictsData) write(w *writer, _ page) {
	f := d.Filter
	w.m(`<form method="get" action="/ui/conflicts" class="filter">
  <label>Integration <input name="integration" value="`).t(f.Integration).m(`"></label>
  <label>Tenant <input name="tenant" value="`).t(f.Tenant).m(`"></label>
  <label>Since <input name="since" value="`).t(f.Since).m(`" placeholder="2026-01-02T15:04"></label>
  <label>Until <input name="until" value="`).t(f.Until).m(`" placeholder="UTC"></label>
  <label>Key prefix <input name="key_prefix" value="`).t(f.KeyPrefix).m(`"></label>
  <button type="submit">Filter</button>
</form>
<table class="list" id="conflicts">
<thead><tr><th>Detected</th><th>Key</th><th>Tenant</th><th>Original (seq, sha256)</th><th>Conflicting (seq, sha256)</th><th></th></tr></thead>
<tbody>
`)
	for _, cf := range d.Conflicts {
		w.m(`<tr>
<td>`).t(ts(cf.DetectedAt)).m(`</td>
<td><a href="`).u(eventLink(cf.Key)).m(`">`).t(cf.Key).m(`</a></td><td>`).t(cf.Tenant).m(`</td>
<td>`).n(cf.OriginalStreamSeq).m(` <code>`).t(short(cf.OriginalSHA256, 16)).m(`</code></td>
<td>`).n(cf.ConflictingStreamSeq).m(` <code>`).t(short(cf.ConflictingSHA256, 16)).m(`</code></td>
<td><a class="diff" href="`).u(conflictLink(cf.Key, cf.ID)).m(`">Diff</a></td>
</tr>`)
	}
	if len(d.Conflicts) == 0 {
		w.m(`<tr><td colspan="6" class="empty">No conflicts match.</td></tr>`)
	}
	w.m(`
</tbody></table>
`)
	if d.Next != "" {
		w.m(`<p><a href="`).u(nextLink("/ui/conflicts", d.Query, d.Next)).m(`">Next page →</a></p>`)
	}
}

func (d conflictData) write(w *writer, _ page) {
	cf := d.Conflict
	w.m(`<p><a href="`).u(eventLink(cf.Key)).m(`">The event</a> · received `).t(ts(cf.ReceivedAt)).m(`, detected `).t(ts(cf.DetectedAt)).m(` ·
 <span id="changed">`).n(int64(d.Changed)).m(`</span> line(s) differ.</p>
`)
	if d.Structural {
		w.m(`<p class="hint">Both payloads are JSON: compared field by field, keys in sorted order, so a field that only moved is not a change.</p>
<table class="list" id="fields"><thead><tr><th>Field</th><th>Change</th><th>Original</th><th>Conflicting</th></tr></thead><tbody>
`)
		for _, f := range d.Fields {
			w.m(`<tr class="`).t(f.Op).m(`"><td><code>`).t(f.Path).m(`</code></td><td>`).t(f.Op).m(`</td><td><code>`).t(short(f.Left, 200)).
				m(`</code></td><td><code>`).t(short(f.Right, 200)).m("</code></td></tr>\n")
		}
		if len(d.Fields) == 0 {
			w.m(`<tr><td colspan="4" class="empty">No field differs: the bodies hold the same JSON in another spelling (order, spacing).</td></tr>`)
		}
		w.m("</tbody></table>\n")
	}
	if d.Original.Missing != "" || d.Conflicting.Missing != "" {
		w.m(`<p class="warn">`).t(d.Original.Missing).m(` `).t(d.Conflicting.Missing).m(`</p>`)
		return
	}
	w.m(`<table class="diff" id="diff">
<colgroup><col class="n"><col><col class="n"><col></colgroup>
<thead><tr><th colspan="2">Original — seq `).n(cf.OriginalStreamSeq).m(`, <code>`).t(short(cf.OriginalSHA256, 16)).m(`</code></th>
<th colspan="2">Conflicting — seq `).n(cf.ConflictingStreamSeq).m(`, <code>`).t(short(cf.ConflictingSHA256, 16)).m(`</code></th></tr></thead>
<tbody>
`)
	for _, row := range d.Diff {
		change := row.Op == "change"
		w.m(`<tr class="`).t(row.Op).m(`">
<td class="n">`).n0(row.LN).m(`</td><td class="l`).mif(change, ` del`).m(`">`).t(row.Left).m(`</td>
<td class="n">`).n0(row.RN).m(`</td><td class="r`).mif(change, ` add`).m(`">`).t(row.Right).m(`</td>
</tr>`)
	}
	w.m(`
</tbody></table>`)
}
