package console

import (
	"errors"
	"net/http"
	"time"

	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

// searchData is the payload search's form and, once asked, its answer.
type searchData struct {
	Path, Value, Integration, Since, Until string // as typed
	Integrations                           []string
	MaxWindow                              time.Duration // api.payload_search.max_window
	Ran                                    bool
	Result                                 apiclient.SearchResult
}

// search is the payload search (GET /ui/search?path=&value=&integration=
// &since=&until=): GET /api/v1/search's scan (Replayer.Search) of the
// INTAKE_IN messages of a bounded window whose JSON payload holds value at
// path. It reads payloads, so a viewer's session may search only with
// api.payload_search.viewers, as a viewer's token through the API; the line
// it logs names the path and the counts, never the value.
func (c *Console) search(w http.ResponseWriter, r *http.Request) {
	s := sessionFrom(r.Context())
	if !s.operator() && !c.ro.PayloadSearch.Viewers {
		c.fail(w, r, http.StatusForbidden, "Payload search reads payloads: it needs an operator's sign-in, or api.payload_search.viewers: true in the config.")
		return
	}
	q := r.URL.Query()
	d := searchData{Path: q.Get("path"), Value: q.Get("value"), Integration: q.Get("integration"), Since: q.Get("since"),
		Until: q.Get("until"), Integrations: c.ro.Integrations, MaxWindow: c.ro.PayloadSearch.MaxWindow}
	if !q.Has("path") && !q.Has("value") {
		c.render(w, r, http.StatusOK, "search", "Search payloads", d) // the form alone
		return
	}
	sq := apiclient.SearchQuery{Path: d.Path, Value: d.Value, Integration: d.Integration}
	err := checkChoice("integration", d.Integration, c.ro.Integrations)
	if err == nil {
		sq.Since, err = parseTime("since", d.Since)
	}
	if err == nil {
		sq.Until, err = parseTime("until", d.Until)
	}
	if err != nil {
		c.renderErr(w, r, "search", "Search payloads", d, err.Error())
		return
	}
	d.Result, err = c.rp.Search(r.Context(), sq, c.now())
	var re *replayer.RequestError
	switch {
	case errors.As(err, &re): // a path that does not parse, a window past the bound
		c.renderErr(w, r, "search", "Search payloads", d, re.Error())
		return
	case err != nil:
		c.internal(w, r, "payload search", err)
		return
	}
	d.Ran = true
	c.log.Info("console: payload search", "token_name", s.caller.Name, "path", sq.Path, "integration", sq.Integration,
		"scanned", d.Result.Scanned, "matches", len(d.Result.Matches))
	c.render(w, r, http.StatusOK, "search", "Search payloads", d)
}

func (d searchData) write(w *writer, _ page) {
	w.m(`<p class="hint">The INTAKE_IN messages of a window (the last hour unless given; at most `).t(d.MaxWindow.String()).
		m(`) whose JSON payload holds the value at the path: dotted, array positions as numbers (<code>data.object.customer</code>, <code>items.0.sku</code>); a string equal to the value, or a number, true, false or null written as it. Replay copies are skipped. It reads payloads: the value is not logged.</p>
<form method="get" action="/ui/search" class="filter" id="filter">
  <label>Path <input name="path" id="path" required value="`).t(d.Path).m(`" placeholder="data.object.customer"></label>
  <label>Value <input name="value" id="value" value="`).t(d.Value).m(`"></label>
  <label>Integration `)
	if len(d.Integrations) == 0 {
		w.m(`<input name="integration" id="integration" value="`).t(d.Integration).m(`">`)
	} else {
		w.m(`<select name="integration" id="integration"><option value="">any</option>`)
		for _, in := range d.Integrations {
			w.m(`<option`).mif(in == d.Integration, ` selected`).m(`>`).t(in).m(`</option>`)
		}
		w.m(`</select>`)
	}
	w.m(`</label>
  <label>Since <input name="since" id="since" value="`).t(d.Since).m(`" placeholder="1h, 6h, 2026-01-02T15:04"></label>
  <label>Until <input name="until" value="`).t(d.Until).m(`" placeholder="UTC, or 30m ago"></label>
  <button type="submit" id="search">Search</button>
</form>
`)
	if !d.Ran {
		return
	}
	res := d.Result
	w.m(`<p id="scanned">Read <b>`).n0(res.Scanned).m(`</b> messages stored `).t(ts(res.Since)).m(` to `).t(ts(res.Until))
	if res.Truncated {
		w.m(` <b class="warn">and stopped there (the bound on messages read or matches): narrow the window</b>`)
	}
	w.m(`.</p>
<table class="list" id="matches">
<thead><tr><th>Stored</th><th>Key</th><th>Type</th><th>Stream seq</th></tr></thead>
<tbody>
`)
	for _, m := range res.Matches {
		w.m(`<tr><td>`).t(ts(m.StoredAt)).m(`</td><td><a href="`).u(eventLink(m.Key)).m(`">`).t(m.Key).m(`</a></td><td>`).
			t(m.EventType).m(`</td><td>`).un(m.StreamSeq).m("</td></tr>\n")
	}
	if len(res.Matches) == 0 {
		w.m(`<tr><td colspan="4" class="empty">No payload in the window holds this value at this path.</td></tr>`)
	}
	w.m("</tbody></table>\n")
}
