package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

// destinationsData is the destinations page: every HTTP destination of the
// config with its state, backlog and the window's counts
// (Replayer.Destinations).
type destinationsData struct {
	List []apiclient.Destination
}

// destinationWindow is the console's window for a destination's counts.
const destinationWindow = 15 * time.Minute

func (c *Console) destinations(w http.ResponseWriter, r *http.Request) {
	list, err := c.rp.Destinations(r.Context(), destinationWindow)
	if err != nil {
		c.internal(w, r, "destinations", err)
		return
	}
	c.render(w, r, http.StatusOK, "destinations", "Destinations", destinationsData{List: list})
}

func destinationLink(name string) link {
	return link(Prefix + "/destination?name=" + url.QueryEscape(name))
}

func (d destinationsData) write(w *writer, _ page) {
	w.m(`<p class="hint">The HTTP services the dispatcher pushes processed events to (<code>destinations:</code> in the config).
Failing: a dispatcher's circuit breaker is open, or most attempts of the last 15 minutes were not delivered.
Backlog: messages not delivered yet or waiting out a retry.</p>
<table class="list" id="destinations">
<thead><tr><th>Name</th><th>State</th><th>Backlog</th><th>Oldest</th><th>Attempts (15 min)</th><th>Delivered</th><th>Retried</th><th>Failed</th><th>Success</th><th>Last attempt</th></tr></thead>
<tbody>
`)
	for _, x := range d.List {
		w.m(`<tr data-destination="`).t(x.Name).m(`"><td><a href="`).u(destinationLink(x.Name)).m(`">`).t(x.Name).m(`</a><br><small>`).t(x.URL).
			m(`</small></td><td><span class="status `).t(x.State).m(`">`).t(x.State).m(`</span></td>`)
		writeDestinationFigures(w, x)
		w.m("</tr>\n")
	}
	if len(d.List) == 0 {
		w.m(`<tr><td colspan="10" class="empty">No destination is configured (destinations: in the config; docs/destinations.md).</td></tr>`)
	}
	w.m("</tbody></table>\n")
}

// writeDestinationFigures writes a destination's cells after its state.
func writeDestinationFigures(w *writer, x apiclient.Destination) {
	w.m(`<td class="backlog">`)
	if x.Backlog != nil {
		w.un(*x.Backlog)
	} else {
		w.m(`?`)
	}
	w.m(`</td><td>`)
	if x.OldestUndeliveredAgeSeconds != nil {
		w.t(age(*x.OldestUndeliveredAgeSeconds))
	} else {
		w.m(`?`)
	}
	w.m(`</td><td>`).n(x.Attempts).m(`</td><td>`).n(x.Delivered).m(`</td><td>`).n(x.Retried).m(`</td><td class="failed">`).n(x.Failed).m(`</td><td>`)
	if x.SuccessRate != nil {
		w.t(fmt.Sprintf("%.1f%%", 100**x.SuccessRate))
	} else {
		w.m(`–`)
	}
	w.m(`</td><td>`)
	if a := x.LastAttempt; a != nil {
		w.t(a.Outcome)
		if a.StatusCode != nil {
			w.m(` `).n0(*a.StatusCode)
		} else if a.ErrorClass != "" {
			w.m(` `).t(a.ErrorClass)
		}
		w.m(`<br><small>`).t(ts(a.AttemptedAt)).m(`</small>`)
	} else {
		w.m(`–`)
	}
	w.m(`</td>`)
}

// age prints seconds as the largest whole unit.
func age(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	}
	return strconv.Itoa(int(d.Hours())) + "h"
}

// destinationData is one destination's page.
type destinationData struct {
	apiclient.DestinationDetail
	// Retry is how many failed deliveries a retry would send again (its
	// dry run), when asked.
	Retry *int64
}

func (c *Console) destination(w http.ResponseWriter, r *http.Request) {
	c.showDestination(w, r, r.URL.Query().Get("name"), nil, http.StatusOK, "")
}

func (c *Console) showDestination(w http.ResponseWriter, r *http.Request, name string, retry *int64, code int, msg string) {
	detail, err := c.rp.Destination(r.Context(), name, destinationWindow)
	var re *replayer.RequestError
	switch {
	case errors.As(err, &re):
		c.fail(w, r, http.StatusNotFound, re.Error())
		return
	case err != nil:
		c.internal(w, r, "destination", err)
		return
	}
	s := sessionFrom(r.Context())
	c.write(w, code, page{Title: "Destination " + name, Nav: "destination", User: s.caller, CSRF: s.csrf(), Operator: s.operator(),
		Data: destinationData{DestinationDetail: detail, Retry: retry}, Error: msg})
}

// pauseDestination pauses or resumes a destination (a reason is required
// to pause) and shows it.
func (c *Console) pauseDestination(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "name")
		err := c.rp.PauseDestination(r.Context(), name, pause, sessionFrom(r.Context()).caller.Name, r.PostForm.Get("reason"))
		var re *replayer.RequestError
		switch {
		case errors.As(err, &re):
			c.showDestination(w, r, name, nil, http.StatusBadRequest, re.Error())
			return
		case err != nil:
			c.internal(w, r, "pause destination", err)
			return
		}
		http.Redirect(w, r, string(destinationLink(name)), http.StatusSeeOther)
	}
}

// retryDestination redelivers the destination's failed deliveries to it:
// without confirm a dry run shown on its page, with confirm (and a reason)
// the redelivery, then its page.
func (c *Console) retryDestination(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	confirm := r.PostForm.Get("confirm") == "1"
	reason := r.PostForm.Get("reason")
	if confirm && reason == "" {
		c.showDestination(w, r, name, nil, http.StatusBadRequest, "reason: required to retry the failed deliveries (it goes in the audit log)")
		return
	}
	dry := !confirm
	rep, err := c.rp.Redeliver(r.Context(), sessionFrom(r.Context()).caller.Name, apiclient.RedeliveryRequest{
		Source: apiclient.SourceFailed, Destination: name, DryRun: &dry, Reason: reason})
	if err != nil {
		var re *replayer.RequestError
		if errors.As(err, &re) {
			c.showDestination(w, r, name, nil, http.StatusBadRequest, re.Error())
			return
		}
		if c.replayErr(w, r, err) {
			return
		}
	}
	if dry {
		c.showDestination(w, r, name, &rep.Matched, http.StatusOK, "")
		return
	}
	http.Redirect(w, r, string(replayLink(rep.ID, "")), http.StatusSeeOther)
}

func (d destinationData) write(w *writer, p page) {
	x := d.Destination
	w.m(`<p><a href="/ui/destinations">← Destinations</a></p>
<dl class="facts">
  <dt>State</dt><dd><span class="status `).t(x.State).m(`" id="state">`).t(x.State).m(`</span>`)
	if x.Paused {
		w.m(` by `).t(deref(x.PausedBy)).m(` at `).t(tsp(x.PausedAt)).m(`: `).t(deref(x.PausedReason))
	}
	if x.CircuitOpen {
		w.m(` <b>circuit breaker open</b> since `).t(tsp(x.CircuitChangedAt)).m(` (a dispatcher probes it with one delivery at a time)`)
	}
	w.m(`</dd>
  <dt>URL</dt><dd><code>`).t(x.URL).m(`</code></dd>
  <dt>Match</dt><dd>tenants `).t(list(x.Match.Tenants)).m(`, integrations `).t(list(x.Match.Integrations)).m(`, types `).t(list(x.Match.Types)).m(`</dd>
</dl>
<table class="list" id="figures"><thead><tr><th>Backlog</th><th>Oldest</th><th>Attempts (15 min)</th><th>Delivered</th><th>Retried</th><th>Failed</th><th>Success</th><th>Last attempt</th></tr></thead>
<tbody><tr>`)
	writeDestinationFigures(w, x)
	w.m("</tr></tbody></table>\n")
	if p.Operator {
		path := Prefix + "/destinations/" + url.PathEscape(x.Name)
		if x.Paused {
			w.m(`<form method="post" action="`).u(link(path + "/resume")).m(`" class="inline mutate">
  <input type="hidden" name="csrf" value="`).t(p.CSRF).m(`">
  <input name="reason" maxlength="2000" placeholder="why (optional)" aria-label="reason">
  <button type="submit" id="resume">Resume deliveries</button>
</form>`)
		} else {
			w.m(`<form method="post" action="`).u(link(path + "/pause")).m(`" class="inline mutate">
  <input type="hidden" name="csrf" value="`).t(p.CSRF).m(`">
  <input name="reason" required maxlength="2000" placeholder="why deliveries stop" aria-label="reason">
  <button type="submit" id="pause">Pause deliveries</button>
</form>`)
		}
		if d.Retry == nil {
			w.m(`<form method="post" action="`).u(link(path + "/retry")).m(`" class="inline mutate">
  <input type="hidden" name="csrf" value="`).t(p.CSRF).m(`">
  <button type="submit" id="retry-dry-run">Retry failed deliveries (dry run first)</button>
</form>`)
		} else {
			w.m(`<div class="plan" id="retry-plan"><p><b>`).n(*d.Retry).m(`</b> failed deliveries would be sent to `).t(x.Name).
				m(` again, under their original webhook-id, to this destination only.</p>`)
			if *d.Retry > 0 {
				w.m(`<form method="post" action="`).u(link(path + "/retry")).m(`" class="inline mutate">
  <input type="hidden" name="csrf" value="`).t(p.CSRF).m(`">
  <input type="hidden" name="confirm" value="1">
  <input name="reason" required maxlength="2000" placeholder="why (the audit log)" aria-label="reason">
  <button type="submit" id="retry-confirm">Redeliver `).n(*d.Retry).m(` to `).t(x.Name).m(`</button>
</form>`)
			}
			w.m(`</div>`)
		}
	}
	w.m(`
<h2>Newest attempts</h2>
<table class="list" id="attempts">
<thead><tr><th>At</th><th>Event</th><th>Attempt</th><th>Outcome</th><th>Status</th><th>Class</th><th>Latency</th><th>Next</th><th>Answer</th></tr></thead>
<tbody>
`)
	for _, a := range d.RecentAttempts {
		writeDispatchRow(w, a)
	}
	if len(d.RecentAttempts) == 0 {
		w.m(`<tr><td colspan="9" class="empty">No attempt yet.</td></tr>`)
	}
	w.m(`</tbody></table>
<h2>Pauses and resumes</h2>
<ul id="actions">
`)
	for _, a := range d.Actions {
		w.m(`<li><time>`).t(ts(a.At)).m(`</time> <b>`).t(a.Action).m(`</b> by `).t(a.RequestedBy)
		if a.Reason != "" {
			w.m(`: `).t(a.Reason)
		}
		w.m("</li>\n")
	}
	if len(d.Actions) == 0 {
		w.m("<li>None.</li>\n")
	}
	w.m("</ul>\n")
}

func writeDispatchRow(w *writer, a apiclient.DispatchAttempt) {
	w.m(`<tr class="`).t(a.Outcome).m(`"><td>`).t(ts(a.AttemptedAt)).m(`</td><td><a href="`).u(eventLink(a.Key)).m(`">`).t(a.Key).
		m(`</a><br><small>webhook-id `).t(a.WebhookID).m(`</small></td><td>`).n0(a.Attempt).m(`</td><td>`).t(a.Outcome).m(`</td><td>`)
	if a.StatusCode != nil {
		w.n0(*a.StatusCode)
	} else {
		w.m(`–`)
	}
	w.m(`</td><td>`).t(a.ErrorClass).m(`</td><td>`).n(a.LatencyMS).m(` ms</td><td>`).t(tsp(a.NextAttemptAt)).m(`</td><td class="err">`).
		t(short(a.Response, 200)).m("</td></tr>\n")
}

// list prints a match's list, "any" when empty.
func list(s []string) string {
	if len(s) == 0 {
		return "any"
	}
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}
