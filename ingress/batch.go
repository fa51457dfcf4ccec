package ingress

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/jsonstr"
	"github.com/intakehq/intake/pkg/envelope"
)

// receiveBatch takes a verified delivery of an integration with split:
// one INTAKE_IN message per item, each under its own scoped key, and the
// 2xx only once every one is PubAcked. A bad item refuses the whole
// delivery before anything is published (400 bad_batch; provider.Splitter);
// a publish that fails answers 503 and the provider's retry brings the
// whole batch again, its stored items then PubAck.Duplicate. The repeat
// memory (answerRepeat) is for single deliveries: a batch's retry is
// stopped item by item by the stream's duplicate window.
func (s *Service) receiveBatch(q *request) (int, string) {
	items, err := q.in.splitter.Split(q.body, q.ev, nil)
	if err != nil {
		s.refundClient(q)
		return s.reject(q, rejected(http.StatusBadRequest, "bad_batch"))
	}
	account := q.in.Account
	if q.ev.Account != "" {
		account = q.ev.Account
	}
	if account != "" && !envelope.ValidID(account) {
		s.refundClient(q)
		return s.reject(q, rejected(http.StatusBadRequest, "bad_event_id"))
	}
	msgs := make([]*nats.Msg, len(items))
	keys := make([]envelope.Key, len(items))
	for i, it := range items {
		if !envelope.ValidID(it.ID) {
			s.refundClient(q)
			return s.reject(q, rejected(http.StatusBadRequest, "bad_batch"))
		}
		keys[i] = envelope.Key{Integration: q.in.Name, Account: account, EventID: it.ID}
		d := envelope.NewDelivery(keys[i], q.in.Tenant, envelope.CleanType(it.Type), it.Body, q.now)
		d.Instance, d.RetryHints = s.instance, q.ev.HintMap()
		msgs[i] = d.Msg()
		if s.envelopeKey != nil {
			msgs[i].Header.Set(envelope.HeaderSignature, s.envelopeKey.Sign(msgs[i].Header))
		}
	}
	s.refundClient(q)
	if v := s.limitIntegration(q); v.refused() {
		return s.reject(q, v)
	}
	s.countVerified(q)

	fresh := 0
	dups := make([]bool, len(msgs))
	for i, m := range msgs {
		ack, err := s.publishItem(q, m, keys[i], items[i].Type)
		if err != nil {
			s.metrics.Rejected.WithLabelValues(q.in.Name, string(envelope.AnswerUnavailable)).Inc()
			s.log.Warn("publish failed", s.logArgs(q.r.Context(), "integration", q.in.Name, "key", keys[i].String(),
				"item", i, "items", len(msgs), "err", err)...)
			q.w.Header().Set("Retry-After", retryAfter)
			writeAnswer(q.w, http.StatusServiceUnavailable, Answer{Status: envelope.AnswerUnavailable, Reason: "stream_unavailable"})
			return http.StatusServiceUnavailable, string(envelope.AnswerUnavailable)
		}
		if dups[i] = ack.Duplicate; !ack.Duplicate {
			fresh++
		}
	}
	hints := q.ev.HintMap()
	for i, dup := range dups {
		if dup {
			s.metrics.Duplicates.WithLabelValues(q.in.Name).Inc()
			s.sendReceipt(hints, keys[i], q.now, http.StatusOK, envelope.AnswerDuplicate)
		}
	}
	in := q.in
	in.m.accepted.Add(float64(fresh))
	status := envelope.AnswerAccepted
	if fresh == 0 && len(msgs) > 0 {
		status = envelope.AnswerDuplicate
	}
	if in.ack != nil {
		writeAck(q.w, in.ack)
	} else {
		writeBatchAnswer(q.w, status, len(msgs))
	}
	return http.StatusOK, string(status)
}

// publishItem publishes one item's message and waits for its PubAck,
// within nats.publish_timeout for each.
func (s *Service) publishItem(q *request, m *nats.Msg, key envelope.Key, eventType string) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(q.r.Context(), s.publishTimeout)
	defer cancel()
	start := time.Now()
	ack, err := s.tracePublish(ctx, q, m, key, eventType)
	q.in.m.publishLatency.Observe(time.Since(start).Seconds())
	return ack, err
}

// writeBatchAnswer writes {"status":…,"items":n}: the keys are the items'
// ids under the integration, too many to list.
func writeBatchAnswer(w http.ResponseWriter, status envelope.Answer, n int) {
	b := make([]byte, 0, 48)
	b = append(b, `{"status":`...)
	b = jsonstr.Append(b, string(status))
	b = append(b, `,"items":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, '}', '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
