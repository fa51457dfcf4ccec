package console

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer"
)

// failuresData is the failures page: failed and quarantined events grouped
// by cause (Replayer.FailureGroups), each a work item an operator resolves.
type failuresData struct {
	Integration string
	All         bool
	Groups      []store.FailureGroup
}

func (c *Console) failures(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := failuresData{Integration: q.Get("integration"), All: q.Get("all") == "true"}
	if err := checkChoice("integration", d.Integration, c.ro.Integrations); err != nil {
		c.renderErr(w, r, "failures", "Failures by cause", d, err.Error())
		return
	}
	var err error
	if d.Groups, err = c.rp.FailureGroups(r.Context(), d.Integration, d.All); err != nil {
		c.internal(w, r, "failure groups", err)
		return
	}
	c.render(w, r, http.StatusOK, "failures", "Failures by cause", d)
}

// resolveFailure records an operator's resolution of a group (a note is
// required) and goes back to the list.
func (c *Console) resolveFailure(w http.ResponseWriter, r *http.Request) {
	_, err := c.rp.ResolveFailureGroup(r.Context(), chi.URLParam(r, "id"), sessionFrom(r.Context()).caller.Name, r.PostForm.Get("note"))
	var re *replayer.RequestError
	switch {
	case errors.As(err, &re):
		c.fail(w, r, http.StatusBadRequest, re.Error())
		return
	case errors.Is(err, store.ErrNotFound):
		c.fail(w, r, http.StatusNotFound, "No such failure group (its events may have been replayed or purged).")
		return
	case err != nil:
		c.internal(w, r, "resolve failure group", err)
		return
	}
	http.Redirect(w, r, Prefix+"/failures", http.StatusSeeOther)
}

func (d failuresData) write(w *writer, p page) {
	w.m(`<p class="hint">Failed and quarantined events grouped by integration, status, the error class of their last attempt and
the error with numbers and ids masked. Resolving a group records who dealt with it and how (audited); its events stay as they are —
replay them from <a href="/ui/failed">Failed</a> to apply them. A group whose events fail again after its resolution is open again.</p>
<p><a id="toggle-all" href="`)
	v := url.Values{}
	if d.Integration != "" {
		v.Set("integration", d.Integration)
	}
	if !d.All {
		v.Set("all", "true")
	}
	w.u(listLink("/ui/failures", v)).m(`">`).mif(!d.All, `Show resolved groups too`).mif(d.All, `Open groups only`).m(`</a></p>
<table class="list" id="groups">
<thead><tr><th>Integration</th><th>Status</th><th>Class</th><th>Events</th><th>First / last seen</th><th>Error</th><th>Sample</th><th>Resolution</th></tr></thead>
<tbody>
`)
	for _, g := range d.Groups {
		w.m(`<tr data-group="`).t(g.ID).m(`"><td>`).t(g.Integration).m(`</td><td><span class="status `).t(g.Status).m(`">`).t(g.Status).
			m(`</span></td><td>`).t(g.ErrorClass).m(`</td><td class="events">`).n(g.Events).m(`</td><td>`).t(ts(g.FirstSeen)).m(` / `).t(ts(g.LastSeen)).
			m(`</td><td class="err">`).t(g.Signature).m(`</td><td>`)
		for i, k := range g.SampleKeys {
			w.mif(i > 0, `<br>`).m(`<a href="`).u(eventLink(k)).m(`">`).t(k).m(`</a>`)
		}
		w.m(`</td><td class="resolution">`)
		if g.ResolvedBy != nil {
			w.t(*g.ResolvedBy).m(` at `).t(tsp(g.ResolvedAt)).m(`: `).t(deref(g.Note)).mif(!g.Resolved, ` <b>(failing again since)</b>`)
		}
		if p.Operator {
			w.m(`<form method="post" action="`).u(link(Prefix + "/failures/" + url.PathEscape(g.ID) + "/resolve")).m(`" class="inline mutate">
  <input type="hidden" name="csrf" value="`).t(p.CSRF).m(`">
  <input name="note" required maxlength="2000" placeholder="what was done" aria-label="resolution note">
  <button type="submit">Resolve</button>
</form>`)
		}
		w.m("</td></tr>\n")
	}
	if len(d.Groups) == 0 {
		w.m(`<tr><td colspan="8" class="empty">No open failure group.</td></tr>`)
	}
	w.m("</tbody></table>\n")
}
