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

	"github.com/go-chi/chi/v5"

	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer"
)

type failedData struct {
	Filter filter
	Query  url.Values
	Events []store.Event
	Next   string
}

// failed is the queue of failed (or quarantined) events with their error;
// an operator selects some, or all matching the filter, for a replay.
func (c *Console) failed(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query())
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
	Selector     replayer.Selector
	SelectorJSON string
	Mode         string
	Reason       string
}

// readSelector takes the selector from a form: "selector" (JSON, from a
// dry run or a reconcile's fix), the checked "key"s, or "all" with the
// failed page's filter.
func readSelector(r *http.Request) (replayer.Selector, error) {
	var s replayer.Selector
	if raw := r.PostFormValue("selector"); raw != "" {
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return s, fmt.Errorf("selector: %w", err)
		}
		return s, nil
	}
	if r.PostFormValue("all") != "" {
		s = replayer.Selector{Status: r.PostFormValue("status"), Integration: r.PostFormValue("integration"),
			Tenant: r.PostFormValue("tenant"), EventType: r.PostFormValue("event_type")}
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
	form := replayForm{Selector: sel, Mode: r.PostFormValue("mode"), Reason: r.PostFormValue("reason")}
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
		replayer.ReplayRequest{Selector: form.Selector, Mode: inbox.ReplayMode(form.Mode), DryRun: &dry, Reason: planReason(form)})
	if c.replayErr(w, r, err) {
		return
	}
	b, _ := json.Marshal(form.Selector)
	form.SelectorJSON = string(b)
	d := dryRunData{Replay: rep, Form: form, Modes: []string{string(inbox.ReplayExact), string(inbox.ReplayReexecute)},
		DefaultRate: c.ro.DefaultRate, MaxRate: c.ro.MaxRate}
	s := sessionFrom(r.Context())
	c.write(w, code, "dryrun", page{Title: "Replay: dry run", Nav: "dryrun", User: s.caller, CSRF: s.csrf(), Operator: s.operator(), Data: d, Error: msg})
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
	form := replayForm{Selector: sel, Mode: r.PostFormValue("mode"), Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	rate := 0
	if s := r.PostFormValue("rate"); s != "" {
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
		replayer.ReplayRequest{Selector: sel, Mode: inbox.ReplayMode(form.Mode), DryRun: &dry, Reason: form.Reason, Rate: rate})
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

type replaysData struct {
	Replays []store.Replay
	Next    string
}

func (c *Console) replays(w http.ResponseWriter, r *http.Request) {
	var d replaysData
	var err error
	d.Replays, d.Next, err = c.ro.Store.ListReplays(r.Context(), pageSize, r.URL.Query().Get("cursor"))
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
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := c.pages["replay"].ExecuteTemplate(w, "progress", page{User: s.caller, CSRF: s.csrf(), Operator: s.operator(), Data: d}); err != nil {
			c.log.Error("console: render progress", "err", err)
		}
		return
	}
	c.render(w, r, http.StatusOK, "replay", "Replay "+rep.ID, d)
}
