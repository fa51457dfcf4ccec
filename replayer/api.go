package replayer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// maxRequestBody bounds POST bodies (a replay by keys may list many keys).
const maxRequestBody = 16 << 20

// Mount adds the /api/v1 routes to router: viewers read, operators also
// replay, redeliver and cancel.
func (r *Replayer) Mount(router chi.Router) {
	router.Route("/api/v1", func(api chi.Router) {
		api.Use(RequireToken(r.o.Tokens, r.o.Auth))
		api.Group(func(g chi.Router) {
			g.Use(RequireRole(config.RoleViewer))
			g.Get("/events", r.listEvents)
			g.Get("/events/{integration}/*", r.getEvent) // event ids may contain '/'
			g.Get("/find", r.find)
			g.Get("/status", r.status)
			g.Get("/failures", r.listFailures)
			g.Get("/search", r.search) // payloads: operators, viewers with api.payload_search.viewers
			g.Get("/conflicts", r.listConflicts)
			g.Get("/conflicts/diff", r.conflictDiff)
			g.Get("/rejections", r.listRejections)
			g.Get("/replays", r.listReplays)
			g.Get("/replays/{id}", r.getReplay)
			g.Get("/redeliveries/{id}", r.getReplay)
			g.Get("/reconcile", r.reconcile)
			g.Get("/gaps", r.gaps)
			g.Get("/redrive", r.redriveStatus)
			g.Get("/destinations", r.listDestinations)
			g.Get("/destinations/{name}", r.getDestination)
			g.Get("/destinations/{name}/attempts", r.listDestinationAttempts)
		})
		api.Group(func(g chi.Router) {
			g.Use(RequireRole(config.RoleOperator))
			g.Post("/replays", r.postReplay)
			g.Post("/failures/{id}/resolve", r.resolveFailure)
			g.Post("/replays/{id}/cancel", r.cancelReplay)
			g.Post("/replays/{id}/approve", r.approveReplay)
			g.Post("/redeliveries", r.postRedelivery)
			g.Post("/redeliveries/{id}/cancel", r.cancelReplay)
			g.Post("/destinations/{name}/pause", r.pauseDestination(true))
			g.Post("/destinations/{name}/resume", r.pauseDestination(false))
		})
	})
}

// getEvent returns one event. The account is optional (?account=):
// integrations have one account scope unless a verified header supplies it.
func (r *Replayer) getEvent(w http.ResponseWriter, req *http.Request) {
	integration := chi.URLParam(req, "integration")
	eventID := chi.URLParam(req, "*")
	if req.URL.RawPath != "" { // chi matched the escaped path
		if un, err := url.PathUnescape(eventID); err == nil {
			eventID = un
		}
	}
	var (
		ev  store.EventRecord
		err error
	)
	ctx := req.Context()
	if account, ok := req.URL.Query()["account"]; ok {
		ev, err = r.o.Store.GetEvent(ctx, envelope.Key{Integration: integration, Account: account[0], EventID: eventID})
	} else {
		ev, err = r.o.Store.FindEvent(ctx, integration, eventID)
	}
	if errors.Is(err, store.ErrNotFound) {
		// No inbox row: a failing event waiting for its next attempt?
		ev, err = r.o.Store.RetryingEvent(ctx, envelope.Key{Integration: integration, Account: req.URL.Query().Get("account"), EventID: eventID})
	}
	if err != nil {
		r.writeFailure(w, failure{call: "get event", notFound: "no such event (no inbox row, and no handler attempt waiting for a retry)"}, err)
		return
	}
	d := eventHistory{EventRecord: ev}
	k := envelope.Key{Integration: ev.Integration, Account: ev.Account, EventID: ev.EventID}
	if d.Attempts, err = r.o.Store.EventAttempts(ctx, k); err != nil {
		r.writeFailure(w, failure{call: "get event attempts"}, err)
		return
	}
	if d.ConflictRecords, err = r.o.Store.EventConflicts(ctx, k); err == nil {
		if d.Deliveries, err = r.o.Store.EventDeliveryHistory(ctx, k); err == nil {
			if d.Executions, err = r.o.Store.EventExecutions(ctx, k); err == nil {
				if d.Replays, err = r.o.Store.ReplaysOfEvent(ctx, k); err == nil {
					if d.Rejections, err = r.o.Store.EventRejections(ctx, k); err == nil {
						if d.ReplayedBodies, err = r.o.Store.EventReplayedBodies(ctx, k); err == nil {
							d.DispatchAttempts, err = r.o.Store.DispatchAttemptsOf(ctx, k.String())
						}
					}
				}
			}
		}
	}
	if err != nil {
		r.writeFailure(w, failure{call: "get event history"}, err)
		return
	}
	writeJSON(w, http.StatusOK, d.wire())
}

func (r *Replayer) listEvents(w http.ResponseWriter, req *http.Request) {
	q := query{v: req.URL.Query()}
	f := store.EventFilter{
		Integration: q.integration(r), Tenant: q.str("tenant"), EventType: q.str("event_type"),
		Status: q.oneOf("status", eventStatuses), Since: q.time("since"), Until: q.time("until"), KeyPrefix: q.str("key_prefix"),
		Limit: q.int("limit"), Cursor: q.str("cursor"),
	}
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	list := r.o.Store.ListEvents
	if f.Status == string(store.StatusRetrying) {
		list = r.o.Store.ListRetrying // no inbox row yet: from the attempts
	}
	events, next, err := list(req.Context(), f)
	if err != nil {
		r.writeFailure(w, failure{call: "list events"}, err)
		return
	}
	if events == nil {
		events = []store.EventRecord{}
	}
	writeJSON(w, http.StatusOK, eventPage(events, next))
}

func (r *Replayer) listConflicts(w http.ResponseWriter, req *http.Request) {
	q := query{v: req.URL.Query()}
	f := store.ConflictFilter{
		Integration: q.integration(r), Tenant: q.str("tenant"), Since: q.time("since"), Until: q.time("until"),
		KeyPrefix: q.str("key_prefix"), Limit: q.int("limit"), Cursor: q.str("cursor"),
	}
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	list, next, err := r.o.Store.ListConflicts(req.Context(), f)
	if err != nil {
		r.writeFailure(w, failure{call: "list conflicts"}, err)
		return
	}
	if list == nil {
		list = []store.Conflict{}
	}
	writeJSON(w, http.StatusOK, conflictPage(list, next))
}

func (r *Replayer) listRejections(w http.ResponseWriter, req *http.Request) {
	q := query{v: req.URL.Query()}
	f := store.RejectionFilter{
		// integration is not checked: an unknown_integration rejection names one the config lacks.
		Integration: q.str("integration"), Tenant: q.str("tenant"), Reason: q.oneOf("reason", store.RejectReasons), ReplayID: q.str("replay_id"),
		Since: q.time("since"), Until: q.time("until"), FromSeq: q.uint("from_seq"), ToSeq: q.uint("to_seq"),
		KeyPrefix: q.str("key_prefix"), Limit: q.int("limit"), Cursor: q.str("cursor"),
	}
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	list, next, err := r.o.Store.ListRejections(req.Context(), f)
	if err != nil {
		r.writeFailure(w, failure{call: "list rejections"}, err)
		return
	}
	if list == nil {
		list = []store.Rejection{}
	}
	writeJSON(w, http.StatusOK, rejectionPage(list, next))
}

func (r *Replayer) listReplays(w http.ResponseWriter, req *http.Request) {
	q := query{v: req.URL.Query()}
	// Dry runs are left out unless asked for (dry_runs=include or only):
	// the audit log an operator reads is of what was published.
	f := store.ReplayFilter{Mode: q.oneOf("mode", store.ReplayModes), State: q.oneOf("state", store.ReplayStates),
		RequestedBy: q.str("requested_by"), DryRuns: q.oneOf("dry_runs", store.DryRunChoices),
		Since: q.time("since"), Until: q.time("until"), Limit: q.int("limit"), Cursor: q.str("cursor")}
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	list, next, err := r.o.Store.ListReplays(req.Context(), f)
	if err != nil {
		r.writeFailure(w, failure{call: "list replays"}, err)
		return
	}
	if list == nil {
		list = []store.Replay{}
	}
	writeJSON(w, http.StatusOK, replayPage(list, next))
}

func (r *Replayer) getReplay(w http.ResponseWriter, req *http.Request) {
	rep, err := r.o.Store.GetReplay(req.Context(), chi.URLParam(req, "id"))
	if err != nil {
		r.writeFailure(w, failure{call: "get replay", notFound: "no such replay"}, err)
		return
	}
	out := wireReplay(rep)
	// Without the results (JetStream or Postgres did not answer) the
	// record still answers: it is what the audit needs.
	if out.Results, err = r.Results(req.Context(), rep); err != nil {
		r.o.Log.Warn("replay results", "replay_id", rep.ID, "err", err)
	}
	writeJSON(w, http.StatusOK, out)
}

func (r *Replayer) postReplay(w http.ResponseWriter, req *http.Request) {
	allowSlow(w)
	var spec apiclient.ReplayRequest
	if !decodeBody(w, req, &spec) {
		return
	}
	c, _ := CallerFrom(req.Context())
	rep, err := r.Replay(req.Context(), c.Name, spec)
	r.answerStarted(w, rep, err)
}

func (r *Replayer) postRedelivery(w http.ResponseWriter, req *http.Request) {
	allowSlow(w)
	var spec apiclient.RedeliveryRequest
	if !decodeBody(w, req, &spec) {
		return
	}
	c, _ := CallerFrom(req.Context())
	rep, err := r.Redeliver(req.Context(), c.Name, spec)
	r.answerStarted(w, rep, err)
}

// answerStarted: 200 for a dry run (or nothing to publish), 202 for a
// replay that is publishing or awaits a second operator's approval.
func (r *Replayer) answerStarted(w http.ResponseWriter, rep store.Replay, err error) {
	switch {
	case err != nil:
		r.writeFailure(w, failure{call: "replay", tooMany: "selector matches more than %d events: narrow it or split the replay"}, err)
	case rep.State == store.ReplayRunning || rep.State == store.ReplayAwaitingApproval:
		writeJSON(w, http.StatusAccepted, wireReplay(rep))
	default:
		writeJSON(w, http.StatusOK, wireReplay(rep))
	}
}

func (r *Replayer) cancelReplay(w http.ResponseWriter, req *http.Request) {
	c, _ := CallerFrom(req.Context())
	id := chi.URLParam(req, "id")
	rep, changed, err := r.Cancel(req.Context(), id, c.Name)
	if err != nil {
		r.writeFailure(w, failure{call: "cancel replay", notFound: "no such replay"}, err)
		return
	}
	if !changed {
		writeJSON(w, http.StatusConflict, map[string]any{"error": "replay is " + rep.State + ", neither running nor awaiting approval", "replay": wireReplay(rep)})
		return
	}
	r.stopLocal(id)
	writeJSON(w, http.StatusOK, wireReplay(rep))
}

// approveReplay: 200 with the replay, now running; 403 for its requester;
// 409 when it awaits no approval.
func (r *Replayer) approveReplay(w http.ResponseWriter, req *http.Request) {
	c, _ := CallerFrom(req.Context())
	rep, changed, err := r.Approve(req.Context(), chi.URLParam(req, "id"), c.Name)
	switch {
	case errors.Is(err, store.ErrSameOperator):
		writeError(w, http.StatusForbidden, "a replay is approved by an operator other than the one who requested it ("+rep.RequestedBy+")")
	case err != nil:
		r.writeFailure(w, failure{call: "approve replay", notFound: "no such replay"}, err)
	case !changed:
		writeJSON(w, http.StatusConflict, map[string]any{"error": "replay is " + rep.State + ", not awaiting approval", "replay": wireReplay(rep)})
	default:
		writeJSON(w, http.StatusOK, wireReplay(rep))
	}
}

func (r *Replayer) reconcile(w http.ResponseWriter, req *http.Request) {
	allowSlow(w)
	q := query{v: req.URL.Query()}
	spec := ReconcileRequest{FromSeq: q.uint("from_seq"), ToSeq: q.uint("to_seq"), Since: q.time("since"),
		Until: q.time("until"), Integration: q.str("integration")}
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	if spec.FromSeq == 0 && spec.ToSeq == 0 && spec.Since.IsZero() && spec.Until.IsZero() {
		writeError(w, http.StatusBadRequest, "give from_seq/to_seq or since/until")
		return
	}
	if c, _ := CallerFrom(req.Context()); c.Role != config.RoleOperator {
		spec.MaxSpan, spec.Viewer = r.o.ReconcileViewerMaxSpan, true
	}
	res, err := r.Reconcile(req.Context(), spec)
	if err != nil {
		r.writeFailure(w, failure{call: "reconcile", tooMany: "range holds more than %d messages: narrow it"}, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
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

// failure is what a handler tells writeFailure about its call: the name
// logged with an internal error, and the answers only some calls give.
type failure struct {
	call     string // logged with a 500: "list events"
	notFound string // the 404 to store.ErrNotFound ("no such replay"); "": a 500
	tooMany  string // the 422 to ErrTooMany, a format of Options.MaxMatched; "": a 500
}

// writeFailure answers err, from a handler's call, with the API's one
// mapping of errors to HTTP: a request refused as asked 400, an unknown id
// 404, a selector or range too large 422, too many reconciles running 429
// (with Retry-After), anything else 500 — logged, and never shown.
func (r *Replayer) writeFailure(w http.ResponseWriter, f failure, err error) {
	var re *RequestError
	switch {
	case errors.As(err, &re):
		writeError(w, http.StatusBadRequest, re.Error())
	case errors.Is(err, store.ErrBadCursor):
		writeError(w, http.StatusBadRequest, "cursor: invalid")
	case errors.Is(err, store.ErrNotFound) && f.notFound != "":
		writeError(w, http.StatusNotFound, f.notFound)
	case errors.Is(err, ErrBusy):
		w.Header().Set("Retry-After", strconv.Itoa(int(reconcileRetryAfter.Seconds())))
		msg := fmt.Sprintf("%d reconciles are running on this replayer, the most it runs at once: retry later", r.o.MaxReconciles)
		if errors.Is(err, errViewerBusy) {
			msg = "a viewer's reconcile is running on this replayer, and viewers run one at a time: retry later"
		}
		writeError(w, http.StatusTooManyRequests, msg)
	case errors.Is(err, ErrSpanTooLarge):
		writeError(w, http.StatusUnprocessableEntity, "range: "+strings.TrimPrefix(err.Error(), ErrSpanTooLarge.Error()+": "))
	case errors.Is(err, ErrTooMany) && f.tooMany != "":
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf(f.tooMany, r.o.MaxMatched))
	default:
		r.o.Log.Error(f.call, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error")
	}
}

// decodeBody reads a JSON body strictly: unknown fields are errors, so a
// misspelt selector field cannot widen a replay.
func decodeBody(w http.ResponseWriter, req *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxRequestBody))
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

// oneOf is the parameter name, which must be empty or one of allowed: a
// filter that names no possible value is refused (400, naming the allowed
// values), not answered with an empty page that reads as "nothing there".
func (q *query) oneOf(name string, allowed []string) string {
	s := q.v.Get(name)
	if s != "" && !slices.Contains(allowed, s) && q.err == nil {
		q.err = fmt.Errorf("%s: unknown %q; one of: %s", name, s, strings.Join(allowed, ", "))
	}
	return s
}

// integration is the integration parameter, which must name one of the
// replayer's integrations (its config's, or its shard's) when it knows them.
func (q *query) integration(r *Replayer) string {
	if len(r.o.Integrations) == 0 {
		return q.str("integration")
	}
	return q.oneOf("integration", r.o.Integrations)
}

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
