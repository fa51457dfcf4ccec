package replayer

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/replayer/apiclient"
)

// Destination states (apiclient.Destination.State).
const (
	DestinationHealthy = "healthy"
	DestinationFailing = "failing"
	DestinationPaused  = "paused"
)

const (
	// defaultDestinationWindow is how far back the destinations' counts
	// look unless ?window= says otherwise; maxDestinationWindow bounds it
	// (each look aggregates the delivery log's rows of the window).
	defaultDestinationWindow = 15 * time.Minute
	maxDestinationWindow     = 24 * time.Hour
	// recentAttempts is how many attempts a destination's detail shows.
	recentAttempts = 20
	// maxPauseReason bounds an operator's reason.
	maxPauseReason = 2000
)

// destinationState is a destination's state from what is known of it: an
// operator's pause wins, then an open breaker or a window whose attempts
// were mostly not delivered.
func destinationState(paused, circuitOpen bool, st store.DestinationStats) string {
	switch {
	case paused:
		return DestinationPaused
	case circuitOpen, st.Attempts > 0 && 2*st.Delivered < st.Attempts:
		return DestinationFailing
	}
	return DestinationHealthy
}

// destination returns the configured destination named name.
func (r *Replayer) destination(name string) (config.Destination, bool) {
	for _, d := range r.o.Destinations {
		if d.Name == name {
			return d, true
		}
	}
	return config.Destination{}, false
}

// checkDestination refuses a name the config does not list.
func (r *Replayer) checkDestination(field, name string) error {
	if _, ok := r.destination(name); ok {
		return nil
	}
	names := make([]string, 0, len(r.o.Destinations))
	for _, d := range r.o.Destinations {
		names = append(names, d.Name)
	}
	if len(names) == 0 {
		return badRequest("%s: unknown destination %q; the config has none (destinations[])", field, name)
	}
	return badRequest("%s: unknown destination %q; one of: %s", field, name, strings.Join(names, ", "))
}

func windowOf(q *query) time.Duration {
	s := q.str("window")
	if s == "" {
		return defaultDestinationWindow
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > maxDestinationWindow {
		if q.err == nil {
			q.err = badRequest("window: a duration up to %s (15m, 1h), got %q", maxDestinationWindow, s)
		}
		return 0
	}
	return d
}

func (r *Replayer) listDestinations(w http.ResponseWriter, req *http.Request) {
	q := query{v: req.URL.Query()}
	window := windowOf(&q)
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	list, err := r.Destinations(req.Context(), window)
	if err != nil {
		r.writeFailure(w, failure{call: "list destinations"}, err)
		return
	}
	writeJSON(w, http.StatusOK, apiclient.DestinationList{Destinations: list})
}

// Destinations returns every configured destination's state, backlog and
// counts over window.
func (r *Replayer) Destinations(ctx context.Context, window time.Duration) ([]apiclient.Destination, error) {
	states, err := r.o.Store.DestinationStates(ctx)
	if err != nil {
		return nil, err
	}
	stats, err := r.o.Store.DestinationStatsSince(ctx, time.Now().Add(-window))
	if err != nil {
		return nil, err
	}
	out := make([]apiclient.Destination, 0, len(r.o.Destinations))
	for _, d := range r.o.Destinations {
		x := wireDestination(d, states[d.Name], stats[d.Name], window)
		r.addBacklog(ctx, &x, d)
		out = append(out, x)
	}
	return out, nil
}

func wireDestination(d config.Destination, s store.DestinationState, st store.DestinationStats, window time.Duration) apiclient.Destination {
	out := apiclient.Destination{Name: d.Name, URL: withoutQuery(d.URL),
		Match: apiclient.DestinationMatch{Tenants: orEmpty(d.Match.Tenants), Integrations: orEmpty(d.Match.Integrations), Types: orEmpty(d.Match.Types)},
		State: destinationState(s.Paused, s.CircuitOpen, st), Paused: s.Paused, PausedAt: s.PausedAt,
		CircuitOpen: s.CircuitOpen, CircuitChangedAt: s.CircuitChanged, Window: window.String(),
		Attempts: st.Attempts, Delivered: st.Delivered, Retried: st.Retried, Failed: st.Failed}
	if s.PausedAt != nil {
		out.PausedBy, out.PausedReason = &s.PausedBy, &s.PausedReason
	}
	if st.Attempts > 0 {
		rate := float64(st.Delivered) / float64(st.Attempts)
		out.SuccessRate = &rate
	}
	if st.LastAt != nil {
		code := st.LastStatus
		last := apiclient.LastAttempt{Outcome: st.LastOutcome, ErrorClass: st.LastClass, AttemptedAt: *st.LastAt}
		if code != 0 {
			last.StatusCode = &code
		}
		out.LastAttempt = &last
	}
	return out
}

// addBacklog sets x's backlog and oldest age from d's consumer; left null
// when it cannot be read.
func (r *Replayer) addBacklog(ctx context.Context, x *apiclient.Destination, d config.Destination) {
	b, err := r.backlog(ctx, d)
	if err != nil {
		return
	}
	n := b.Waiting()
	age := 0.0
	if !b.Oldest.IsZero() {
		age = max(0, time.Since(b.Oldest).Seconds())
	}
	x.Backlog, x.OldestUndeliveredAgeSeconds = &n, &age
}

// backlog reads destination d's consumer on INTAKE_OUT (bounded: a NATS
// that does not answer leaves the figures out, not the page).
func (r *Replayer) backlog(ctx context.Context, d config.Destination) (stream.Backlog, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	s, err := r.o.JS.Stream(ctx, envelope.StreamOut)
	if err != nil {
		return stream.Backlog{}, err
	}
	return stream.ConsumerBacklog(ctx, s, d.Durable())
}

func (r *Replayer) getDestination(w http.ResponseWriter, req *http.Request) {
	q := query{v: req.URL.Query()}
	window := windowOf(&q)
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	d, ok := r.destination(chi.URLParam(req, "name"))
	if !ok {
		writeError(w, http.StatusNotFound, r.checkDestination("name", chi.URLParam(req, "name")).Error())
		return
	}
	ctx := req.Context()
	detail, err := r.destinationDetail(ctx, d, window)
	if err != nil {
		r.writeFailure(w, failure{call: "get destination"}, err)
		return
	}
	writeJSON(w, http.StatusOK, detail)
}

// Destination is one configured destination with its newest attempts and
// the operators' pauses and resumes; a RequestError for a name the config
// does not list.
func (r *Replayer) Destination(ctx context.Context, name string, window time.Duration) (apiclient.DestinationDetail, error) {
	d, ok := r.destination(name)
	if !ok {
		return apiclient.DestinationDetail{}, r.checkDestination("name", name)
	}
	return r.destinationDetail(ctx, d, window)
}

func (r *Replayer) destinationDetail(ctx context.Context, d config.Destination, window time.Duration) (apiclient.DestinationDetail, error) {
	states, err := r.o.Store.DestinationStates(ctx)
	if err != nil {
		return apiclient.DestinationDetail{}, err
	}
	stats, err := r.o.Store.DestinationStatsSince(ctx, time.Now().Add(-window))
	if err != nil {
		return apiclient.DestinationDetail{}, err
	}
	recent, _, err := r.o.Store.ListDispatchAttempts(ctx, store.DispatchFilter{Destination: d.Name, Limit: recentAttempts})
	if err != nil {
		return apiclient.DestinationDetail{}, err
	}
	actions, err := r.o.Store.DestinationActions(ctx, d.Name, recentAttempts)
	if err != nil {
		return apiclient.DestinationDetail{}, err
	}
	x := wireDestination(d, states[d.Name], stats[d.Name], window)
	r.addBacklog(ctx, &x, d)
	return apiclient.DestinationDetail{Destination: x, RecentAttempts: wireAll(recent, wireDispatchAttempt),
		Actions: wireAll(actions, wireDestinationAction)}, nil
}

// dispatchOutcomes are the outcomes a delivery log filter takes.
var dispatchOutcomes = []string{store.DispatchDelivered, store.DispatchRetry, store.DispatchFailed}

func (r *Replayer) listDestinationAttempts(w http.ResponseWriter, req *http.Request) {
	name := chi.URLParam(req, "name")
	if _, ok := r.destination(name); !ok {
		writeError(w, http.StatusNotFound, r.checkDestination("name", name).Error())
		return
	}
	q := query{v: req.URL.Query()}
	f := store.DispatchFilter{Destination: name, Outcome: q.oneOf("outcome", dispatchOutcomes), Key: q.str("key"),
		Since: q.time("since"), Until: q.time("until"), Limit: q.int("limit"), Cursor: q.str("cursor")}
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	list, next, err := r.o.Store.ListDispatchAttempts(req.Context(), f)
	if err != nil {
		r.writeFailure(w, failure{call: "list destination attempts"}, err)
		return
	}
	writeJSON(w, http.StatusOK, apiclient.DispatchAttemptPage{Attempts: wireAll(list, wireDispatchAttempt), NextCursor: next})
}

func (r *Replayer) pauseDestination(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		var body apiclient.PauseRequest
		if !decodeBody(w, req, &body) {
			return
		}
		name := chi.URLParam(req, "name")
		c, _ := CallerFrom(req.Context())
		if err := r.PauseDestination(req.Context(), name, pause, c.Name, body.Reason); err != nil {
			var re *RequestError
			if errors.As(err, &re) && !slices.ContainsFunc(r.o.Destinations, func(d config.Destination) bool { return d.Name == name }) {
				writeError(w, http.StatusNotFound, err.Error())
				return
			}
			r.writeFailure(w, failure{call: "pause destination"}, err)
			return
		}
		d, _ := r.destination(name)
		detail, err := r.destinationDetail(req.Context(), d, defaultDestinationWindow)
		if err != nil {
			r.writeFailure(w, failure{call: "get destination"}, err)
			return
		}
		writeJSON(w, http.StatusOK, detail.Destination)
	}
}

// PauseDestination pauses (or resumes) a configured destination for every
// dispatcher, audited: who and why (a reason is required to pause).
func (r *Replayer) PauseDestination(ctx context.Context, name string, pause bool, who, reason string) error {
	if err := r.checkDestination("name", name); err != nil {
		return err
	}
	reason = strings.TrimSpace(reason)
	switch {
	case pause && reason == "":
		return badRequest("reason: required: say why deliveries to %s stop", name)
	case len(reason) > maxPauseReason || !utf8.ValidString(reason):
		return badRequest("reason: at most %d bytes of UTF-8", maxPauseReason)
	}
	action := store.DestinationResume
	if pause {
		action = store.DestinationPause
	}
	if err := r.o.Store.PauseDestination(ctx, name, action, who, reason); err != nil {
		return err
	}
	r.o.Log.Info("destination "+action+"d by an operator", "destination", name, "token_name", who, "reason", reason)
	return nil
}

func wireDispatchAttempt(a store.DispatchAttempt) apiclient.DispatchAttempt {
	out := apiclient.DispatchAttempt{Destination: a.Destination, WebhookID: a.MsgID, Key: a.Key, Integration: a.Integration,
		Tenant: a.Tenant, EventType: a.EventType, StreamSeq: a.StreamSeq, Attempt: a.Attempt, Outcome: a.Outcome,
		ErrorClass: a.ErrorClass, LatencyMS: a.Latency.Milliseconds(), Response: a.Response, AttemptedAt: a.AttemptedAt,
		NextAttemptAt: a.NextAttemptAt}
	if a.StatusCode != 0 {
		code := a.StatusCode
		out.StatusCode = &code
	}
	return out
}

func wireDestinationAction(a store.DestinationAction) apiclient.DestinationAction {
	return apiclient.DestinationAction{Action: a.Action, RequestedBy: a.RequestedBy, Reason: a.Reason, At: a.At}
}

// withoutQuery is a destination URL fit for the API: its query, which may
// carry a token, left out.
func withoutQuery(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.RawQuery, u.ForceQuery, u.User = "", false, nil
	return u.String()
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
