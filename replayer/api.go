package replayer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

// maxRequestBody bounds POST bodies (a replay by keys may list many keys).
const maxRequestBody = 16 << 20

// Mount adds the /api/v1 routes to r: viewers read, operators also replay,
// redeliver and cancel.
func (a *Replayer) Mount(r chi.Router) {
	r.Route("/api/v1", func(r chi.Router) {
		r.Use(RequireToken(a.o.Tokens, a.o.Auth))
		r.Group(func(r chi.Router) {
			r.Use(RequireRole(config.RoleViewer))
			r.Get("/events", a.listEvents)
			r.Get("/events/{integration}/*", a.getEvent) // event ids may contain '/'
			r.Get("/conflicts", a.listConflicts)
			r.Get("/rejections", a.listRejections)
			r.Get("/replays", a.listReplays)
			r.Get("/replays/{id}", a.getReplay)
			r.Get("/redeliveries/{id}", a.getReplay)
			r.Get("/reconcile", a.reconcile)
			r.Get("/gaps", a.gaps)
			r.Get("/redrive", a.redriveStatus)
		})
		r.Group(func(r chi.Router) {
			r.Use(RequireRole(config.RoleOperator))
			r.Post("/replays", a.postReplay)
			r.Post("/replays/{id}/cancel", a.cancelReplay)
			r.Post("/redeliveries", a.postRedelivery)
			r.Post("/redeliveries/{id}/cancel", a.cancelReplay)
		})
	})
}

// getEvent returns one event. The account is optional (?account=):
// integrations have one account scope unless a verified header supplies it.
func (a *Replayer) getEvent(w http.ResponseWriter, r *http.Request) {
	integration := chi.URLParam(r, "integration")
	eventID := chi.URLParam(r, "*")
	if r.URL.RawPath != "" { // chi matched the escaped path
		if un, err := url.PathUnescape(eventID); err == nil {
			eventID = un
		}
	}
	var (
		ev  store.Event
		err error
	)
	ctx := r.Context()
	if account, ok := r.URL.Query()["account"]; ok {
		ev, err = a.o.Store.GetEvent(ctx, envelope.Key{Integration: integration, Account: account[0], EventID: eventID})
	} else {
		ev, err = a.o.Store.FindEvent(ctx, integration, eventID)
	}
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no such event")
		return
	}
	if err != nil {
		a.internal(w, "get event", err)
		return
	}
	d := eventHistory{Event: ev}
	k := envelope.Key{Integration: ev.Integration, Account: ev.Account, EventID: ev.EventID}
	if d.ConflictRecords, err = a.o.Store.EventConflicts(ctx, k); err == nil {
		if d.Deliveries, err = a.o.Store.EventDeliveryHistory(ctx, k); err == nil {
			if d.Executions, err = a.o.Store.EventExecutions(ctx, k); err == nil {
				if d.Replays, err = a.o.Store.ReplaysOfEvent(ctx, k); err == nil {
					if d.Rejections, err = a.o.Store.EventRejections(ctx, k); err == nil {
						d.ReplayedBodies, err = a.o.Store.EventReplayedBodies(ctx, k)
					}
				}
			}
		}
	}
	if err != nil {
		a.internal(w, "get event history", err)
		return
	}
	writeJSON(w, http.StatusOK, d.wire())
}

func (a *Replayer) listEvents(w http.ResponseWriter, r *http.Request) {
	q := query{v: r.URL.Query()}
	f := store.EventFilter{
		Integration: q.str("integration"), Tenant: q.str("tenant"), EventType: q.str("event_type"),
		Status: q.str("status"), Since: q.time("since"), Until: q.time("until"), KeyPrefix: q.str("key_prefix"),
		Limit: q.int("limit"), Cursor: q.str("cursor"),
	}
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	events, next, err := a.o.Store.ListEvents(r.Context(), f)
	if errors.Is(err, store.ErrBadCursor) {
		writeError(w, http.StatusBadRequest, "cursor: invalid")
		return
	}
	if err != nil {
		a.internal(w, "list events", err)
		return
	}
	if events == nil {
		events = []store.Event{}
	}
	writeJSON(w, http.StatusOK, eventPage(events, next))
}

func (a *Replayer) listConflicts(w http.ResponseWriter, r *http.Request) {
	q := query{v: r.URL.Query()}
	f := store.ConflictFilter{
		Integration: q.str("integration"), Tenant: q.str("tenant"), Since: q.time("since"), Until: q.time("until"),
		KeyPrefix: q.str("key_prefix"), Limit: q.int("limit"), Cursor: q.str("cursor"),
	}
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	list, next, err := a.o.Store.ListConflicts(r.Context(), f)
	if errors.Is(err, store.ErrBadCursor) {
		writeError(w, http.StatusBadRequest, "cursor: invalid")
		return
	}
	if err != nil {
		a.internal(w, "list conflicts", err)
		return
	}
	if list == nil {
		list = []store.Conflict{}
	}
	writeJSON(w, http.StatusOK, conflictPage(list, next))
}

func (a *Replayer) listRejections(w http.ResponseWriter, r *http.Request) {
	q := query{v: r.URL.Query()}
	f := store.RejectionFilter{
		Integration: q.str("integration"), Tenant: q.str("tenant"), Reason: q.str("reason"), ReplayID: q.str("replay_id"),
		Since: q.time("since"), Until: q.time("until"), KeyPrefix: q.str("key_prefix"), Limit: q.int("limit"), Cursor: q.str("cursor"),
	}
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	list, next, err := a.o.Store.ListRejections(r.Context(), f)
	if errors.Is(err, store.ErrBadCursor) {
		writeError(w, http.StatusBadRequest, "cursor: invalid")
		return
	}
	if err != nil {
		a.internal(w, "list rejections", err)
		return
	}
	if list == nil {
		list = []store.Rejection{}
	}
	writeJSON(w, http.StatusOK, rejectionPage(list, next))
}

func (a *Replayer) listReplays(w http.ResponseWriter, r *http.Request) {
	q := query{v: r.URL.Query()}
	limit, cursor := q.int("limit"), q.str("cursor")
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	list, next, err := a.o.Store.ListReplays(r.Context(), limit, cursor)
	if errors.Is(err, store.ErrBadCursor) {
		writeError(w, http.StatusBadRequest, "cursor: invalid")
		return
	}
	if err != nil {
		a.internal(w, "list replays", err)
		return
	}
	if list == nil {
		list = []store.Replay{}
	}
	writeJSON(w, http.StatusOK, replayPage(list, next))
}

func (a *Replayer) getReplay(w http.ResponseWriter, r *http.Request) {
	rep, err := a.o.Store.GetReplay(r.Context(), chi.URLParam(r, "id"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no such replay")
		return
	}
	if err != nil {
		a.internal(w, "get replay", err)
		return
	}
	writeJSON(w, http.StatusOK, wireReplay(rep))
}

func (a *Replayer) postReplay(w http.ResponseWriter, r *http.Request) {
	allowSlow(w)
	var req ReplayRequest
	if !decodeBody(w, r, &req) {
		return
	}
	c, _ := CallerFrom(r.Context())
	rep, err := a.Replay(r.Context(), c.Name, req)
	a.answerStarted(w, rep, err)
}

func (a *Replayer) postRedelivery(w http.ResponseWriter, r *http.Request) {
	allowSlow(w)
	var req RedeliveryRequest
	if !decodeBody(w, r, &req) {
		return
	}
	c, _ := CallerFrom(r.Context())
	rep, err := a.Redeliver(r.Context(), c.Name, req)
	a.answerStarted(w, rep, err)
}

// answerStarted: 200 for a dry run (or nothing to publish), 202 for a
// replay that is publishing.
func (a *Replayer) answerStarted(w http.ResponseWriter, rep store.Replay, err error) {
	var re *RequestError
	switch {
	case errors.As(err, &re):
		writeError(w, http.StatusBadRequest, re.Error())
	case errors.Is(err, ErrTooMany):
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("selector matches more than %d events: narrow it or split the replay", a.o.MaxMatched))
	case err != nil:
		a.internal(w, "replay", err)
	case rep.State == store.ReplayRunning:
		writeJSON(w, http.StatusAccepted, wireReplay(rep))
	default:
		writeJSON(w, http.StatusOK, wireReplay(rep))
	}
}

func (a *Replayer) cancelReplay(w http.ResponseWriter, r *http.Request) {
	c, _ := CallerFrom(r.Context())
	id := chi.URLParam(r, "id")
	rep, changed, err := a.Cancel(r.Context(), id, c.Name)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no such replay")
		return
	}
	if err != nil {
		a.internal(w, "cancel replay", err)
		return
	}
	if !changed {
		writeJSON(w, http.StatusConflict, map[string]any{"error": "replay is " + rep.State + ", not running", "replay": wireReplay(rep)})
		return
	}
	a.stopLocal(id)
	writeJSON(w, http.StatusOK, wireReplay(rep))
}

func (a *Replayer) reconcile(w http.ResponseWriter, r *http.Request) {
	allowSlow(w)
	q := query{v: r.URL.Query()}
	req := ReconcileRequest{FromSeq: q.uint("from_seq"), ToSeq: q.uint("to_seq"), Since: q.time("since"),
		Until: q.time("until"), Integration: q.str("integration")}
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	if req.FromSeq == 0 && req.ToSeq == 0 && req.Since.IsZero() && req.Until.IsZero() {
		writeError(w, http.StatusBadRequest, "give from_seq/to_seq or since/until")
		return
	}
	if c, _ := CallerFrom(r.Context()); c.Role != config.RoleOperator {
		req.MaxSpan = a.o.ReconcileViewerMaxSpan
	}
	res, err := a.Reconcile(r.Context(), req)
	var re *RequestError
	switch {
	case errors.As(err, &re):
		writeError(w, http.StatusBadRequest, re.Error())
	case errors.Is(err, ErrBusy):
		w.Header().Set("Retry-After", strconv.Itoa(int(reconcileRetryAfter.Seconds())))
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("%d reconciles are running on this replayer, the most it runs at once: retry later", a.o.MaxReconciles))
	case errors.Is(err, ErrSpanTooLarge):
		writeError(w, http.StatusUnprocessableEntity, "range: "+strings.TrimPrefix(err.Error(), ErrSpanTooLarge.Error()+": "))
	case errors.Is(err, ErrTooMany):
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("range holds more than %d messages: narrow it", a.o.MaxMatched))
	case err != nil:
		a.internal(w, "reconcile", err)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// reconcileRetryAfter is the Retry-After of a reconcile refused because
// Options.MaxReconciles are running.
const reconcileRetryAfter = 10 * time.Second

// slowRequestTimeout bounds requests that scan a stream range (dry runs,
// reconcile): longer than the server's write timeout, which is sized for
// webhooks.
const slowRequestTimeout = 10 * time.Minute

// allowSlow lifts the server's write deadline for this response.
func allowSlow(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(slowRequestTimeout))
}

func (a *Replayer) internal(w http.ResponseWriter, what string, err error) {
	a.o.Log.Error(what, "err", err)
	writeError(w, http.StatusInternalServerError, "internal error")
}

// decodeBody reads a JSON body strictly: unknown fields are errors, so a
// misspelt selector field cannot widen a replay.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "body: "+err.Error())
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "body: trailing data after the JSON object")
		return false
	}
	return true
}

// query reads query parameters, keeping the first error (which names the
// parameter).
type query struct {
	v   url.Values
	err error
}

func (q *query) str(name string) string { return q.v.Get(name) }

func (q *query) int(name string) int {
	s := q.v.Get(name)
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if (err != nil || n < 0) && q.err == nil {
		q.err = fmt.Errorf("%s: not a non-negative integer: %q", name, s)
	}
	return n
}

func (q *query) uint(name string) uint64 {
	s := q.v.Get(name)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil && q.err == nil {
		q.err = fmt.Errorf("%s: not a non-negative integer: %q", name, s)
	}
	return n
}

func (q *query) time(name string) time.Time {
	s := q.v.Get(name)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil && q.err == nil {
		q.err = fmt.Errorf("%s: not an RFC 3339 time: %q", name, s)
	}
	return t
}
