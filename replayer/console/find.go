package console

import (
	"net/http"
	"strings"

	"github.com/intakehq/intake/replayer/apiclient"
)

// findData is the search box's answer when it is not one event.
type findData struct {
	Result apiclient.FindResult
}

// find is the header's search box (GET /ui/find?q=): whatever the
// operator has — a key, integration/id, the provider's event id, an
// INTAKE_IN sequence — through the API's lookup (Replayer.Find). One event
// found opens its page; otherwise the matches, or where it looked.
func (c *Console) find(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if q == "" || len(q) > 1024 {
		c.renderErr(w, r, "find", "Find", findData{}, "q: a scoped key, integration/event_id, an event id or an INTAKE_IN sequence (at most 1024 bytes)")
		return
	}
	res, err := c.rp.Find(r.Context(), q)
	if err != nil {
		c.internal(w, r, "find", err)
		return
	}
	if len(res.Matches) == 1 && res.Matches[0].Event != nil {
		http.Redirect(w, r, string(eventLink(res.Matches[0].Key)), http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "find", "Find “"+q+"”", findData{Result: res})
}

func (d findData) write(w *writer, _ page) {
	res := d.Result
	if len(res.Matches) == 0 {
		w.m(`<p id="nothing">Nothing found. Searched: `).t(strings.Join(res.Searched, "; ")).m(`.</p>`)
		return
	}
	w.m(`<table class="list" id="matches">
<thead><tr><th>Key</th><th>Status</th><th>Type</th><th>Found by</th><th>Note</th></tr></thead>
<tbody>
`)
	for _, m := range res.Matches {
		w.m(`<tr><td><a href="`).u(eventLink(m.Key)).m(`">`).t(m.Key).m(`</a></td>`)
		if m.Event != nil {
			w.m(`<td><span class="status `).t(string(m.Event.Status)).m(`">`).t(string(m.Event.Status)).m(`</span></td><td>`).t(m.Event.EventType).m(`</td>`)
		} else {
			w.m(`<td>–</td><td>–</td>`)
		}
		w.m(`<td>`).t(m.How).m(`</td><td>`).t(m.Note).m("</td></tr>\n")
	}
	w.m("</tbody></table>\n")
}
