package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/internal/jsonstr"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/provider"
)

// Answer is the JSON body of every webhook response. It never echoes input
// beyond the scoped key the contract promises.
type Answer struct {
	Status string `json:"status"`           // accepted, duplicate, rejected, unavailable
	Key    string `json:"key,omitempty"`    // scoped key, for accepted and duplicate
	Reason string `json:"reason,omitempty"` // short machine-readable reason for errors
}

// retryAfter is what 503 answers ask providers to wait, in seconds.
const retryAfter = "5"

// busyRetryAfter is the wait asked when the body budget is full: room
// comes back as soon as the bodies in flight are read.
const busyRetryAfter = "1"

func (s *Service) handleWebhook(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	name := chi.URLParam(r, "integration")
	in, ok := s.integrations[name]
	if !ok {
		s.metrics.Received.WithLabelValues("").Inc()
		s.metrics.Rejected.WithLabelValues("", "unknown_integration").Inc()
		writeAnswer(w, http.StatusNotFound, Answer{Status: "rejected", Reason: "unknown_integration"})
		return
	}
	in.m.received.Inc()
	var span trace.Span
	if s.tracer != nil {
		r, span = s.startRequest(r, in)
	}
	code := s.receive(w, r, in, start)
	if span != nil {
		endRequest(span, code)
	}
	latency := in.m.latencyOK
	if code != http.StatusOK {
		latency = s.metrics.RequestLatency.WithLabelValues(name, strconv.Itoa(code))
	}
	latency.Observe(time.Since(start).Seconds())
}

func (s *Service) receive(w http.ResponseWriter, r *http.Request, in *integration, now time.Time) int {
	reject := func(code int, reason string) int {
		s.metrics.Rejected.WithLabelValues(in.Name, reason).Inc()
		s.outcome(r.Context(), reason)
		s.log.Info("webhook rejected",
			s.logArgs(r.Context(), "integration", in.Name, "reason", reason, "status", code, "remote", r.RemoteAddr)...)
		writeAnswer(w, code, Answer{Status: "rejected", Reason: reason})
		return code
	}

	// Before anything costs a body read or a MAC: the client's address
	// limit (a verified delivery gets its token back below), then room for
	// the body in the process-wide budget.
	client := s.addrs.of(r)
	if s.clients != nil {
		if wait, ok := s.clients.take(client, now); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
			return reject(http.StatusTooManyRequests, "client_rate_limited")
		}
	}
	if r.ContentLength > in.MaxBodyBytes {
		return reject(http.StatusRequestEntityTooLarge, "too_large")
	}
	size := r.ContentLength
	if size < 0 {
		size = in.MaxBodyBytes + 1
	}
	rc := http.NewResponseController(w)
	res := s.bodies.reserve(size, now, func() { _ = rc.SetReadDeadline(time.Unix(1, 0)) })
	if res == nil {
		w.Header().Set("Retry-After", busyRetryAfter)
		return reject(http.StatusServiceUnavailable, "busy")
	}
	defer s.bodies.release(res)

	body, err := readBounded(r, in.MaxBodyBytes, res.progress)
	res.finished()
	if res.evicted.Load() {
		// Cut to make room: the read trickled while others waited.
		w.Header().Set("Retry-After", busyRetryAfter)
		return reject(http.StatusServiceUnavailable, "busy")
	}
	if errors.Is(err, errTooLarge) {
		return reject(http.StatusRequestEntityTooLarge, "too_large")
	}
	if err != nil {
		return reject(http.StatusBadRequest, "unreadable_body")
	}
	// A byte scan before the verifier or gjson sees the body: nesting costs
	// a recursive parser memory per level, and deep enough, its stack.
	if jsonDepthExceeds(body, s.maxDepth) {
		return reject(http.StatusBadRequest, "too_deep")
	}

	vspan := s.startVerify(r.Context())
	ev, err := in.verifier.Verify(&provider.Delivery{Header: r.Header, Body: body, Now: now})
	endVerify(vspan, err)
	if err != nil {
		code := http.StatusUnauthorized
		if errors.Is(err, provider.ErrMalformed) {
			code = http.StatusBadRequest
		}
		return reject(code, provider.Reason(err))
	}
	if s.clients != nil {
		s.clients.refund(client)
	}
	// The integration's limit counts verified deliveries only: an unsigned
	// flood must not spend a genuine sender's budget.
	if in.limiter != nil {
		if wait, ok := allow(in.limiter, now); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
			return reject(http.StatusTooManyRequests, "rate_limited")
		}
	}
	in.m.verified.Inc()
	if ev.SecretIndex < len(in.m.secretMatched) {
		in.m.secretMatched[ev.SecretIndex].Inc()
	} else {
		s.metrics.SecretMatched.WithLabelValues(in.Name, strconv.Itoa(ev.SecretIndex)).Inc()
	}
	if ev.Challenge != "" {
		// A verified handshake (Slack's url_verification) proves the
		// endpoint; it is no event, so nothing is published.
		s.metrics.Handshakes.WithLabelValues(in.Name).Inc()
		s.outcome(r.Context(), "handshake")
		writeJSON(w, http.StatusOK, challengeAnswer{Challenge: ev.Challenge})
		return http.StatusOK
	}
	account := in.Account
	if ev.Account != "" {
		account = ev.Account
	}
	if !envelope.ValidID(ev.ID) || (account != "" && !envelope.ValidID(account)) {
		return reject(http.StatusBadRequest, "bad_event_id")
	}
	ev.Type = envelope.CleanType(ev.Type)
	key := envelope.Key{Integration: in.Name, Account: account, EventID: ev.ID}
	d := envelope.NewDelivery(key, in.Tenant, ev.Type, body, now)
	d.Instance, d.RetryHints = s.instance, ev.HintMap()
	if ev.ObjectID != "" {
		// Ordering needs both halves: an object id whose version is missing
		// or unreadable is refused (400, the provider retries after a config
		// fix) rather than applied without the guard against stale versions.
		if !envelope.ValidID(ev.ObjectID) {
			return reject(http.StatusBadRequest, "bad_object_id")
		}
		v, err := envelope.ParseVersion(ev.ObjectVersion)
		if err != nil {
			return reject(http.StatusBadRequest, "bad_object_version")
		}
		d.ObjectID, d.ObjectVersion = ev.ObjectID, v
	}
	msg := d.Msg()

	ctx, cancel := context.WithTimeout(r.Context(), s.publishTimeout)
	defer cancel()
	pubStart := time.Now()
	pspan := s.startPublish(ctx, msg, key, ev.Type)
	ack, err := s.publish(ctx, msg)
	endPublish(pspan, ack, err)
	in.m.publishLatency.Observe(time.Since(pubStart).Seconds())
	if err != nil {
		// Not persisted (or not confirmed): the provider must retry. A retry
		// of a write that did land is stopped by the duplicate window.
		s.metrics.Rejected.WithLabelValues(in.Name, "unavailable").Inc()
		s.outcome(r.Context(), "unavailable")
		s.log.Warn("publish failed", s.logArgs(r.Context(), "integration", in.Name, "key", key.String(), "err", err)...)
		w.Header().Set("Retry-After", retryAfter)
		writeAnswer(w, http.StatusServiceUnavailable, Answer{Status: "unavailable", Reason: "stream_unavailable"})
		s.sendReceipt(ev.HintMap(), key, now, http.StatusServiceUnavailable, "unavailable")
		return http.StatusServiceUnavailable
	}
	if ack.Duplicate {
		s.metrics.Duplicates.WithLabelValues(in.Name).Inc()
		s.outcome(r.Context(), "duplicate")
		writeAnswer(w, http.StatusOK, Answer{Status: "duplicate", Key: key.String()})
		s.sendReceipt(ev.HintMap(), key, now, http.StatusOK, "duplicate")
		return http.StatusOK
	}
	in.m.accepted.Inc()
	s.outcome(r.Context(), "accepted")
	// No receipt: the accepted delivery enters the history from its stream
	// message (Intake-Instance, Intake-Retry-Hints).
	writeAnswer(w, http.StatusOK, Answer{Status: "accepted", Key: key.String()})
	return http.StatusOK
}

// errCodeDuplicateInProcess is JetStream's answer (409, err_code 10158) on
// a replicated stream to a message id whose first copy is still being
// replicated: the first copy's fate is not known yet.
const errCodeDuplicateInProcess jetstream.ErrorCode = 10158

// publish publishes msg and waits for its PubAck. A concurrent duplicate on
// a replicated stream is refused while the first copy is in process; it is
// sent again until the first copy's fate decides — PubAck.Duplicate once
// that copy is stored, stored itself if that copy failed — or ctx ends.
func (s *Service) publish(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	for attempt := 0; ; attempt++ {
		ack, err := requestPubAck(ctx, s.js.Conn(), msg)
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeDuplicateInProcess {
			return ack, err
		}
		if backoff.Sleep(ctx, inProcessBackoff.Next(attempt)) != nil {
			return nil, err
		}
	}
}

// inProcessBackoff spaces the retries of a duplicate whose first copy is
// still being replicated: that takes a round of replication, milliseconds.
var inProcessBackoff = backoff.Backoff{Min: 5 * time.Millisecond, Max: 100 * time.Millisecond}

var errTooLarge = errors.New("body too large")

// readBounded reads at most limit bytes; a declared or actual size above it
// is errTooLarge, without reading the rest. progress, when set, is told of
// every read (the body budget spots slow reads by it).
func readBounded(r *http.Request, limit int64, progress func(int, time.Time)) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errTooLarge
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		// One allocation for a declared body (its bytes are reserved in the
		// budget already): ReadFrom wants MinRead bytes free before the read
		// that finds EOF, or it doubles the buffer.
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	var src io.Reader = r.Body
	if progress != nil {
		src = &progressReader{r: r.Body, progress: progress}
	}
	if _, err := buf.ReadFrom(io.LimitReader(src, limit+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limit {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}

// progressReader reports the bytes read through it.
type progressReader struct {
	r        io.Reader
	progress func(int, time.Time)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.progress(n, time.Now())
	return n, err
}

// writeAnswer writes a as JSON without encoding/json's reflection, which
// showed in ingress's profiles at saturation. The bytes are encoding/json's
// but where it escapes more: <, >, &, U+2028/2029, and each invalid UTF-8
// byte (here one U+FFFD per run).
func writeAnswer(w http.ResponseWriter, code int, a Answer) {
	b := make([]byte, 0, 64+len(a.Key))
	b = append(b, `{"status":`...)
	b = jsonstr.Append(b, a.Status)
	if a.Key != "" {
		b = append(b, `,"key":`...)
		b = jsonstr.Append(b, a.Key)
	}
	if a.Reason != "" {
		b = append(b, `,"reason":`...)
		b = jsonstr.Append(b, a.Reason)
	}
	b = append(b, '}', '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// challengeAnswer is the answer to a verified handshake, in the shape Slack
// documents: {"challenge": "…"}. The challenge is the one input echoed; the
// provider signed it and the verifier bounded it to printable ASCII.
type challengeAnswer struct {
	Challenge string `json:"challenge"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
