package console

import (
	"encoding/json"
	"errors"
	"net/http"
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
