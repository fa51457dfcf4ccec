package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

// The stream's integrity checks beside reconcile: the gap check (GET
// /api/v1/gaps, run now) and this replayer's re-drive passes (GET
// /api/v1/redrive). Both are under the Reconcile entry of the navigation,
// and link to one another and to it.

type gapsData struct{ Gaps apiclient.Gaps }

// gaps runs a gap check now, as GET /api/v1/gaps does.
func (c *Console) gaps(w http.ResponseWriter, r *http.Request) {
	g, err := c.rp.CheckGaps(r.Context())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		c.fail(w, r, http.StatusServiceUnavailable, "The gap check cannot run: "+err.Error())
		return
	}
	if err != nil {
		c.internal(w, r, "gap check", err)
		return
	}
	c.render(w, r, http.StatusOK, "reconcile", "Gap check", gapsData{Gaps: g})
}

// checksNav links the three integrity pages to one another.
func checksNav(w *writer, on string) {
	w.m(`<p class="quick" id="checks">`)
	for i, p := range []struct{ href, label, name markup }{
		{"/ui/reconcile", "Reconcile a range", "reconcile"}, {"/ui/gaps", "Gap check", "gaps"}, {"/ui/redrive", "Re-drive passes", "redrive"}} {
		w.mif(i > 0, ` · `)
		if string(p.name) == on {
			w.m(`<b>`).m(p.label).m(`</b>`)
		} else {
			w.m(`<a href="`).m(p.href).m(`">`).m(p.label).m(`</a>`)
		}
	}
	w.m("</p>\n")
}

func (d gapsData) write(w *writer, _ page) {
	g := d.Gaps
	checksNav(w, "gaps")
	w.m(`<p class="hint">Checked now (`).t(ts(g.CheckedAt)).m(`), as every replayer does at start and every api.gap_check_interval: acknowledged messages gone from `).t(g.Stream).
		m(`, inbox rows past its last sequence, and delivery receipts of the last hour whose settled message left neither an inbox row nor a rejection.</p>
<p id="verdict">`)
	if g.Found() {
		w.m(`<b class="warn">Gaps found</b>: reconcile the range and look for lost events.`)
	} else {
		w.m(`<span class="status done">No gap</span>`)
	}
	w.m(`</p>
<dl class="facts" id="gaps">
  <dt>Stream / first / last seq</dt><dd>`).t(g.Stream).m(` / `).un(g.FirstSeq).m(` / `).un(g.LastSeq).m(`</dd>
  <dt>Deleted inside the range</dt><dd id="deleted">`).un(g.Deleted).m(`</dd>
`)
	if len(g.DeletedSample) > 0 {
		w.m(`  <dt>Deleted (some)</dt><dd>`)
		for _, s := range g.DeletedSample {
			q := url.Values{"from_seq": {strconv.FormatUint(s, 10)}, "to_seq": {strconv.FormatUint(s, 10)}}
			w.m(`<a href="`).u(listLink("/ui/reconcile", q)).m(`">`).un(s).m(`</a> `)
		}
		w.m("</dd>\n")
	}
	w.m(`  <dt>Inbox max seq / rolled back</dt><dd>`).un(g.InboxMaxSeq).m(` / <span id="rolled-back">`).un(g.RolledBack).m(`</span></dd>
  <dt>Receipts without an event</dt><dd id="receipts">`).un(g.ReceiptsWithoutEvent).m(`</dd>
`)
	if len(g.ReceiptsSample) > 0 {
		w.m(`  <dt>Their keys (some)</dt><dd>`)
		for _, k := range g.ReceiptsSample {
			w.m(`<code>`).t(k).m(`</code> `)
		}
		w.m("</dd>\n")
	}
	w.m("</dl>\n")
}

type redriveData struct{ Status apiclient.RedriveStatus }

// redrive shows this replayer's re-drive settings and last passes, as GET
// /api/v1/redrive does (each replayer keeps its own, in memory).
func (c *Console) redrive(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "reconcile", "Re-drive passes", redriveData{Status: c.rp.RedriveStatus()})
}

func (d redriveData) write(w *writer, _ page) {
	st := d.Status
	checksNav(w, "redrive")
	w.m(`<p class="hint">Re-drive replays, exactly and audited, events the processor acknowledged whose inbox row is gone (a commit lost when a Postgres standby was promoted). These are the last passes of the replayer serving this page; each replayer keeps its own, in memory.
 Their replays: <a href="`).u(listLink("/ui/replays", url.Values{"requested_by": {replayer.RedriveRequester}})).m(`" id="redrive-replays">requested by `).t(replayer.RedriveRequester).m(`</a>.</p>
<dl class="facts" id="redrive">
  <dt>Enabled</dt><dd id="enabled">`)
	if st.Enabled {
		w.m(`yes, every `).t(st.Interval)
	} else {
		w.m(`no (api.redrive_interval is negative)`)
	}
	w.m(`</dd>
  <dt>Lookback</dt><dd>`).t(st.Lookback).m(`</dd>
  <dt>Checked up to seq</dt><dd>`).un(st.Cursor).m(`</dd>
</dl>
<table class="list" id="passes">
<thead><tr><th>At</th><th>Trigger</th><th>Range</th><th>Checked</th><th>Missing</th><th>Re-driven</th><th>Conflicts recorded</th><th>Unfixable</th><th>Replays</th><th>Error</th></tr></thead>
<tbody>
`)
	for _, p := range st.Passes {
		w.m(`<tr>
<td>`).t(ts(p.At)).m(`</td><td>`).t(string(p.Trigger)).m(`</td><td>`)
		if p.FromSeq > 0 || p.ToSeq > 0 {
			q := url.Values{"from_seq": {strconv.FormatUint(p.FromSeq, 10)}, "to_seq": {strconv.FormatUint(p.ToSeq, 10)}}
			w.m(`<a href="`).u(listLink("/ui/reconcile", q)).m(`">`).un(p.FromSeq).m(`–`).un(p.ToSeq).m(`</a>`)
		}
		w.mif(p.Truncated, ` (truncated)`).m(`</td>
<td>`).n(int64(p.Checked)).m(`</td><td>`).n(int64(p.Missing)).m(`</td><td>`).n(int64(p.Redriven)).m(`</td><td>`).
			n(int64(p.ConflictsRecorded)).m(`</td><td>`).n(int64(p.Unfixable)).m(`</td><td>`)
		for _, id := range p.ReplayIDs {
			w.m(`<a href="`).u(replayLink(id, "")).m(`">`).t(short(id, 8)).m(`</a> `)
		}
		w.m(`</td><td class="err">`).t(p.Error).m(`</td>
</tr>`)
	}
	if len(st.Passes) == 0 {
		w.m(`<tr><td colspan="10" class="empty">No pass yet on this replayer.</td></tr>`)
	}
	w.m(`
</tbody></table>
`)
}
