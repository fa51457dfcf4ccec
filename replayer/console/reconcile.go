package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/intakehq/intake/replayer"
)

type reconcileData struct {
	FromSeq, ToSeq, Since, Until, Integration string
	Ran                                       bool
	Result                                    replayer.ReconcileResult
	FixJSON                                   string
}

// reconcile checks an INTAKE_IN range against the inbox (as GET
// /api/v1/reconcile, a viewer's span bounded the same way) and shows the
// fix; an operator can dry-run the fix from here.
func (c *Console) reconcile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := reconcileData{FromSeq: q.Get("from_seq"), ToSeq: q.Get("to_seq"), Since: q.Get("since"), Until: q.Get("until"),
		Integration: q.Get("integration")}
	if d.FromSeq == "" && d.ToSeq == "" && d.Since == "" && d.Until == "" {
		c.render(w, r, http.StatusOK, "reconcile", "Reconcile", d)
		return
	}
	req := replayer.ReconcileRequest{Integration: d.Integration}
	var err error
	seq := func(name, s string) uint64 {
		if s == "" || err != nil {
			return 0
		}
		n, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil {
			err = errors.New(name + ": not a non-negative integer: " + strconv.Quote(s))
		}
		return n
	}
	req.FromSeq, req.ToSeq = seq("from_seq", d.FromSeq), seq("to_seq", d.ToSeq)
	if err == nil {
		if req.Since, err = parseTime("since", d.Since); err == nil {
			req.Until, err = parseTime("until", d.Until)
		}
	}
	if err != nil {
		c.renderErr(w, r, "reconcile", "Reconcile", d, err.Error())
		return
	}
	if !sessionFrom(r.Context()).operator() {
		req.MaxSpan = c.ro.ReconcileViewerMaxSpan
	}
	res, err := c.rp.Reconcile(r.Context(), req)
	var re *replayer.RequestError
	switch {
	case errors.As(err, &re):
		c.renderErr(w, r, "reconcile", "Reconcile", d, re.Error())
		return
	case errors.Is(err, replayer.ErrBusy), errors.Is(err, replayer.ErrSpanTooLarge), errors.Is(err, replayer.ErrTooMany):
		c.renderErr(w, r, "reconcile", "Reconcile", d, strings.TrimPrefix(err.Error(), "replayer: ")+": narrow the range or retry later")
		return
	case err != nil:
		c.internal(w, r, "reconcile", err)
		return
	}
	d.Ran, d.Result = true, res
	if res.Fix != nil {
		b, _ := json.Marshal(res.Fix.Selector)
		d.FixJSON = string(b)
	}
	c.render(w, r, http.StatusOK, "reconcile", "Reconcile", d)
}

// rejectionsQuery is the rejections page's filter for the checked range:
// its sequences, or its times (the rejections' own, which follow the
// messages' by the processor's delay), and its integration.
func (d reconcileData) rejectionsQuery() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"integration": d.Integration, "from_seq": d.FromSeq, "to_seq": d.ToSeq} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if d.FromSeq == "" && d.ToSeq == "" {
		for k, s := range map[string]string{"since": d.Since, "until": d.Until} {
			if s != "" {
				v.Set(k, s)
			}
		}
	}
	return v
}

func (d reconcileData) write(w *writer, p page) {
	checksNav(w, "reconcile")
	w.m(`<p class="hint">Compare an INTAKE_IN range with the inbox: messages acknowledged to the provider with no inbox row are missing, and the fix is the replay that processes them.</p>
<form method="get" action="/ui/reconcile" class="filter">
  <label>From seq <input name="from_seq" id="from_seq" value="`).t(d.FromSeq).m(`"></label>
  <label>To seq <input name="to_seq" id="to_seq" value="`).t(d.ToSeq).m(`"></label>
  <label>Since <input name="since" value="`).t(d.Since).m(`" placeholder="2026-01-02T15:04"></label>
  <label>Until <input name="until" value="`).t(d.Until).m(`" placeholder="UTC"></label>
  <label>Integration <input name="integration" value="`).t(d.Integration).m(`"></label>
  <button type="submit" id="check">Check</button>
</form>
`)
	if !d.Ran {
		return
	}
	res := d.Result
	w.m(`<dl class="facts" id="result">
  <dt>Checked</dt><dd id="checked">`).n(int64(res.Checked)).m(`</dd>
  <dt>Missing</dt><dd id="missing">`).n(int64(len(res.Missing))).mif(res.Truncated, `+ (truncated)`).m(`</dd>
  <dt>Pending (not yet acked by the processor)</dt><dd>`).n(int64(res.Pending)).m(`</dd>
  <dt>Rejected on purpose</dt><dd><a id="rejected" href="`).u(listLink("/ui/rejections", d.rejectionsQuery())).m(`">`).n(int64(res.Rejected)).m(`</a></dd>
  <dt>Ack floor / last seq</dt><dd>`).un(res.AckFloor).m(` / `).un(res.LastSeq).m(`</dd>
  <dt>Lost conflict records</dt><dd>`).n(int64(len(res.LostConflicts))).m(`</dd>
</dl>
`)
	if len(res.Missing) > 0 {
		w.m(`<table class="list"><thead><tr><th>Key</th><th>Stream seq</th></tr></thead><tbody>
`)
		for _, m := range res.Missing {
			w.m(`<tr><td>`).t(m.Key).m(`</td><td>`).un(m.StreamSeq).m(`</td></tr>`)
		}
		w.m("</tbody></table>\n")
	}
	if d.FixJSON == "" {
		w.m(`<p>Nothing to fix.</p>`)
		return
	}
	w.m(`<h2>Proposed fix</h2><pre id="fix">`).t(d.FixJSON).m("</pre>\n")
	if p.Operator {
		w.m(`<form method="post" action="/ui/replays/dry-run" class="mutate"><input type="hidden" name="csrf" value="`).t(p.CSRF).m(`">
<input type="hidden" name="selector" value="`).t(d.FixJSON).m(`"><button type="submit" id="dry-run-fix">Dry-run the fix</button></form>`)
	}
}
