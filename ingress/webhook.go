package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
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
	Status envelope.Answer `json:"status"`
	Key    string          `json:"key,omitempty"`    // scoped key, for accepted and duplicate
	Reason string          `json:"reason,omitempty"` // short machine-readable reason for errors
	// Items is how many events a split delivery carried (batch.go); absent
	// for a delivery of one event.
	Items int `json:"items,omitempty"`
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
		writeAnswer(w, http.StatusNotFound, Answer{Status: envelope.AnswerRejected, Reason: "unknown_integration"})
		return
	}
	in.m.received.Inc()
	if hs := in.handshaker; hs != nil && hs.ClaimsPOST(r.URL.RawQuery) {
		// Microsoft Graph's validation: unsigned, answered before any
		// body read or signature check (handshake.go).
		s.answerUnverified(w, r, in, start)
		return
	}
	q := request{w: w, r: r, in: in, now: start}
	code := s.traceRequest(&q)
	latency := in.m.latencyOK
	if code != http.StatusOK {
		latency = s.metrics.RequestLatency.WithLabelValues(name, strconv.Itoa(code))
	}
	latency.Observe(time.Since(start).Seconds())
}

// request is one webhook request to a known integration on its way through
// the pipeline, with what the steps have learnt of it so far. It lives on
// handleWebhook's stack: every step is a direct call that keeps no pointer
// to it, so it costs no allocation.
type request struct {
	w   http.ResponseWriter
	r   *http.Request
	in  *integration
	now time.Time

	client netip.Addr        // the address limitClient charged
	res    *bodyRead         // the body's room in the in-flight budget
	body   []byte            // the raw body, the bytes the signature covers
	ev     provider.Identity // what the verifier read from the delivery
	key    envelope.Key      // the scoped key
	seen   delivery          // the delivery as s.recent knows it
	copied bool              // its body was published seconds ago under another unsigned id
	msg    *nats.Msg         // the INTAKE_IN message

	// Tracing only (trace.go): when the request arrived and its signature
	// check ran, for the spans started once it reaches its publish.
	arrival, verifyStart, verifyEnd time.Time
	span                            trace.Span
}

// verdict is what a step decided: the zero verdict lets the request go on
// to the next step; any other refuses it, answered code with reason.
type verdict struct {
	code       int
	reason     string
	retryAfter string // the refusal's Retry-After, in seconds; "" for none
}

func rejected(code int, reason string) verdict { return verdict{code: code, reason: reason} }

func retryLater(code int, reason, after string) verdict {
	return verdict{code: code, reason: reason, retryAfter: after}
}

// refused reports whether the step refused the request.
func (v verdict) refused() bool { return v.code != 0 }

// receive runs the pipeline of doc.go on q, one step after the other, and
// answers it. It returns the answer's status code and the request's
// outcome — a refusal's reason, or what became of the event — which the
// request span records (traceRequest).
func (s *Service) receive(q *request) (code int, outcome string) {
	// Before anything costs a body read or a MAC.
	if v := s.limitClient(q); v.refused() {
		return s.reject(q, v)
	}
	if v := s.checkDeclaredSize(q); v.refused() {
		return s.reject(q, v)
	}
	if v := s.reserveBody(q); v.refused() {
		return s.reject(q, v)
	}
	defer s.bodies.release(q.res)
	if v := s.readBody(q); v.refused() {
		return s.reject(q, v)
	}
	if v := s.checkDepth(q); v.refused() {
		return s.reject(q, v)
	}
	if v := s.verify(q); v.refused() {
		return s.reject(q, v)
	}
	if q.in.splitter != nil && q.ev.Challenge == "" {
		return s.receiveBatch(q)
	}
	if q.ev.Challenge == "" {
		if v := s.scopeKey(q); v.refused() {
			s.refundClient(q)
			return s.reject(q, v)
		}
		// Before the integration's limit: a delivery published seconds ago
		// is answered from memory, spending neither (issue 30, item 4).
		if code, outcome, repeated := s.answerRepeat(q); repeated {
			return code, outcome
		}
	}
	s.refundClient(q)
	if v := s.limitIntegration(q); v.refused() {
		return s.reject(q, v)
	}
	s.countVerified(q)
	if q.ev.Challenge != "" {
		return s.answerHandshake(q)
	}
	if v := s.buildMessage(q); v.refused() {
		return s.reject(q, v)
	}
	ack, err := s.publish(q)
	return s.answerPublished(q, ack, err)
}

// limitClient takes a token from the client address's limit (429 +
// Retry-After). A delivery that verifies gets it back (refundClient) unless
// it repeats one just published: the limit is for unsigned and badly
// signed requests, and for replays.
func (s *Service) limitClient(q *request) verdict {
	if s.clients == nil {
		return verdict{}
	}
	q.client = s.addrs.of(q.r)
	if wait, ok := s.clients.take(q.client, q.now); !ok {
		return retryLater(http.StatusTooManyRequests, "client_rate_limited", strconv.Itoa(retryAfterSeconds(wait)))
	}
	return verdict{}
}

// checkDeclaredSize refuses a declared length over the limit (413) before
// anything is reserved or read.
func (s *Service) checkDeclaredSize(q *request) verdict {
	if q.r.ContentLength > q.in.MaxBodyBytes {
		return rejected(http.StatusRequestEntityTooLarge, "too_large")
	}
	return verdict{}
}

// reserveBody reserves room for the body in the process-wide budget (503 +
// Retry-After when full): its declared length, or the limit and one byte
// when undeclared. The reservation may cut this read later, should it
// trickle while others wait.
func (s *Service) reserveBody(q *request) verdict {
	size := q.r.ContentLength
	if size < 0 {
		size = q.in.MaxBodyBytes + 1
	}
	rc := http.NewResponseController(q.w)
	q.res = s.bodies.reserve(size, q.now, func() { _ = rc.SetReadDeadline(time.Unix(1, 0)) })
	if q.res == nil {
		return retryLater(http.StatusServiceUnavailable, "busy", busyRetryAfter)
	}
	return verdict{}
}

// readBody reads the raw body, bounded (413), into q.body.
func (s *Service) readBody(q *request) verdict {
	body, err := readBounded(q.r, q.in.MaxBodyBytes, q.res.progress)
	q.res.finished()
	switch {
	case q.res.evicted.Load():
		// Cut to make room: the read trickled while others waited.
		return retryLater(http.StatusServiceUnavailable, "busy", busyRetryAfter)
	case errors.Is(err, errTooLarge):
		return rejected(http.StatusRequestEntityTooLarge, "too_large")
	case err != nil:
		return rejected(http.StatusBadRequest, "unreadable_body")
	}
	q.body = body
	return verdict{}
}

// checkDepth is a byte scan of the body's JSON nesting (400) before the
// verifier or gjson sees it: nesting costs a recursive parser memory per
// level, and deep enough, its stack.
func (s *Service) checkDepth(q *request) verdict {
	if jsonDepthExceeds(q.body, s.maxDepth) {
		return rejected(http.StatusBadRequest, "too_deep")
	}
	return verdict{}
}

// verify checks the signature and timestamp (401; 400 when malformed)
// before anything parses the body, so an unsigned request never reserves
// an event id.
func (s *Service) verify(q *request) verdict {
	ev, err := s.traceVerify(q, q.in.verifier, &provider.Request{Header: q.r.Header, Body: q.body, Now: q.now})
	if err != nil {
		code := http.StatusUnauthorized
		switch {
		case errors.Is(err, provider.ErrMalformed):
			code = http.StatusBadRequest
		case errors.Is(err, provider.ErrUnavailable):
			// A key the verifier could not fetch now (paypal): never a
			// verdict on the delivery; the sender retries.
			return retryLater(http.StatusServiceUnavailable, provider.Reason(err), retryAfter)
		}
		return rejected(code, provider.Reason(err))
	}
	q.ev = ev
	return verdict{}
}

// refundClient gives a verified delivery its client-address token back.
func (s *Service) refundClient(q *request) {
	if s.clients != nil {
		s.clients.refund(q.client)
	}
}

// answerRepeat answers a delivery this instance published within the
// last seconds (s.recent) without publishing it again or charging the
// integration's limit: 200 duplicate, with a receipt, for its first
// recentRepeats repeats — what the stream would answer — then 429 +
// Retry-After until it is forgotten. Its client-address token is not
// given back. repeated is false for any other delivery; one whose body was
// published under another unsigned id is marked copied (limitIntegration).
func (s *Service) answerRepeat(q *request) (code int, outcome string, repeated bool) {
	q.seen = s.recent.of(q.key, q.body, q.in.unsignedID)
	seen, ok, wait := s.recent.repeat(q.seen, q.now)
	switch {
	case !seen:
		q.copied = s.recent.copied(q.seen, q.now)
		return 0, "", false
	case !ok:
		code, outcome = s.reject(q, retryLater(http.StatusTooManyRequests, "repeated", strconv.Itoa(retryAfterSeconds(wait))))
		return code, outcome, true
	}
	s.countVerified(q)
	s.metrics.Duplicates.WithLabelValues(q.in.Name).Inc()
	writeStored(q.w, q.in, Answer{Status: envelope.AnswerDuplicate, Key: q.key.String()})
	s.sendReceipt(q.ev.HintMap(), q.key, q.now, http.StatusOK, envelope.AnswerDuplicate)
	return http.StatusOK, string(envelope.AnswerDuplicate), true
}

// limitIntegration takes a token from the integration's rate limit (429 +
// Retry-After). It counts verified deliveries only: an unsigned flood must
// not spend a genuine sender's budget. A copy of a body just published,
// under a fresh unsigned id (a capture replayed), takes one from a budget
// of its own instead (429 repeated).
func (s *Service) limitIntegration(q *request) verdict {
	limiter, reason := q.in.limiter, "rate_limited"
	if q.copied {
		limiter, reason = q.in.copies, "repeated"
	}
	if limiter == nil {
		return verdict{}
	}
	if wait, ok := allow(limiter, q.now); !ok {
		return retryLater(http.StatusTooManyRequests, reason, strconv.Itoa(retryAfterSeconds(wait)))
	}
	return verdict{}
}

// countVerified counts the verified delivery, and which of the
// integration's secrets verified it (a rotation's progress).
func (s *Service) countVerified(q *request) {
	q.in.m.verified.Inc()
	if i := q.ev.SecretIndex; i < len(q.in.m.secretMatched) {
		q.in.m.secretMatched[i].Inc()
	} else {
		s.metrics.SecretMatched.WithLabelValues(q.in.Name, strconv.Itoa(i)).Inc()
	}
}

// answerHandshake answers a verified handshake (Slack's url_verification):
// it proves the endpoint and is no event, so nothing is published.
func (s *Service) answerHandshake(q *request) (int, string) {
	s.metrics.Handshakes.WithLabelValues(q.in.Name).Inc()
	writeHandshake(q.w, &q.ev)
	return http.StatusOK, "handshake"
}

// scopeKey checks the event id (400) and builds the scoped key.
func (s *Service) scopeKey(q *request) verdict {
	ev := &q.ev
	account := q.in.Account
	if ev.Account != "" {
		account = ev.Account
	}
	if !envelope.ValidID(ev.ID) || (account != "" && !envelope.ValidID(account)) {
		return rejected(http.StatusBadRequest, "bad_event_id")
	}
	q.key = envelope.Key{Integration: q.in.Name, Account: account, EventID: ev.ID}
	return verdict{}
}

// buildMessage builds the INTAKE_IN message of q's scoped key.
func (s *Service) buildMessage(q *request) verdict {
	ev := &q.ev
	ev.Type = envelope.CleanType(ev.Type)
	d := envelope.NewDelivery(q.key, q.in.Tenant, ev.Type, q.body, q.now)
	d.Instance, d.RetryHints = s.instance, ev.HintMap()
	if ev.ObjectID != "" {
		// Ordering needs both halves: an object id whose version is missing
		// or unreadable is refused (400, the provider retries after a config
		// fix) rather than applied without the guard against stale versions.
		if !envelope.ValidID(ev.ObjectID) {
			return rejected(http.StatusBadRequest, "bad_object_id")
		}
		v, err := envelope.ParseVersion(ev.ObjectVersion)
		if err != nil {
			return rejected(http.StatusBadRequest, "bad_object_version")
		}
		d.ObjectID, d.ObjectVersion = ev.ObjectID, v
	}
	q.msg = d.Msg()
	if s.envelopeKey != nil {
		q.msg.Header.Set(envelope.HeaderSignature, s.envelopeKey.Sign(q.msg.Header))
	}
	return verdict{}
}

// publish publishes q's message to INTAKE_IN and waits, at most
// nats.publish_timeout, for its PubAck: the durable boundary.
func (s *Service) publish(q *request) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(q.r.Context(), s.publishTimeout)
	defer cancel()
	start := time.Now()
	ack, err := s.tracePublish(ctx, q, q.msg, q.key, q.ev.Type)
	q.in.m.publishLatency.Observe(time.Since(start).Seconds())
	return ack, err
}

// answerPublished answers by the publish's result: 200 accepted, 200
// duplicate (the stream's window stopped the message), 503 + Retry-After
// without a PubAck.
func (s *Service) answerPublished(q *request, ack *jetstream.PubAck, err error) (int, string) {
	in, key := q.in, q.key
	if err != nil {
		// Not persisted (or not confirmed): the provider must retry. A retry
		// of a write that did land is stopped by the duplicate window.
		s.metrics.Rejected.WithLabelValues(in.Name, string(envelope.AnswerUnavailable)).Inc()
		s.refusals.add(in.Name, http.StatusServiceUnavailable, "stream_unavailable", q.now)
		s.log.Warn("publish failed", s.logArgs(q.r.Context(), "integration", in.Name, "key", key.String(), "err", err)...)
		q.w.Header().Set("Retry-After", retryAfter)
		writeAnswer(q.w, http.StatusServiceUnavailable, Answer{Status: envelope.AnswerUnavailable, Reason: "stream_unavailable"})
		s.sendReceipt(q.ev.HintMap(), key, q.now, http.StatusServiceUnavailable, envelope.AnswerUnavailable)
		return http.StatusServiceUnavailable, string(envelope.AnswerUnavailable)
	}
	// Stored: a repeat within seconds is answered from memory (answerRepeat).
	s.recent.remember(q.seen, q.now)
	if ack.Duplicate {
		s.metrics.Duplicates.WithLabelValues(in.Name).Inc()
		writeStored(q.w, in, Answer{Status: envelope.AnswerDuplicate, Key: key.String()})
		s.sendReceipt(q.ev.HintMap(), key, q.now, http.StatusOK, envelope.AnswerDuplicate)
		return http.StatusOK, string(envelope.AnswerDuplicate)
	}
	in.m.accepted.Inc()
	// No receipt: the accepted delivery enters the history from its stream
	// message (Intake-Instance, Intake-Retry-Hints).
	writeStored(q.w, in, Answer{Status: envelope.AnswerAccepted, Key: key.String()})
	return http.StatusOK, string(envelope.AnswerAccepted)
}

// writeStored answers 200 to a stored delivery (accepted or duplicate):
// a, or the body the integration's sender expects instead (in.ack:
// Adyen's "[accepted]"). Refusals and 503s stay JSON: a sender that wants
// its acknowledgement retries without it.
func writeStored(w http.ResponseWriter, in *integration, a Answer) {
	if in.ack != nil {
		writeAck(w, in.ack)
		return
	}
	writeAnswer(w, http.StatusOK, a)
}

// writeAck writes a sender's acknowledgement as text/plain.
func writeAck(w http.ResponseWriter, ack []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(ack)
}

// reject answers a refused request: its reason's count, a log line
// (never the body; rate-limited per integration and reason, rejectLog) and
// {"status":"rejected","reason":…}.
func (s *Service) reject(q *request, v verdict) (int, string) {
	s.metrics.Rejected.WithLabelValues(q.in.Name, v.reason).Inc()
	s.refusals.add(q.in.Name, v.code, v.reason, q.now)
	if ok, suppressed := s.rejects.allow(q.in.Name, v.reason, q.now); ok {
		args := []any{"integration", q.in.Name, "reason", v.reason, "status", v.code, "remote", q.r.RemoteAddr}
		if suppressed > 0 {
			args = append(args, "suppressed", suppressed)
		}
		s.log.Info("webhook rejected", s.logArgs(q.r.Context(), args...)...)
	}
	if v.retryAfter != "" {
		q.w.Header().Set("Retry-After", v.retryAfter)
	}
	writeAnswer(q.w, v.code, Answer{Status: envelope.AnswerRejected, Reason: v.reason})
	return v.code, v.reason
}

// errCodeDuplicateInProcess is JetStream's answer (409, err_code 10158) on
// a replicated stream to a message id whose first copy is still being
// replicated: the first copy's fate is not known yet.
const errCodeDuplicateInProcess jetstream.ErrorCode = 10158

// publishMsg publishes msg and waits for its PubAck. A concurrent duplicate
// on a replicated stream is refused while the first copy is in process; it
// is sent again until the first copy's fate decides — PubAck.Duplicate once
// that copy is stored, stored itself if that copy failed — or ctx ends.
func (s *Service) publishMsg(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
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
	b = jsonstr.Append(b, string(a.Status))
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
