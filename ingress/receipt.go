package ingress

import (
	"time"

	"github.com/google/uuid"

	"github.com/intakehq/intake/pkg/envelope"
)

// sendReceipt records an answered, verified delivery that did not become a
// stream message (the duplicate window stopped it, or the stream was away)
// for the event's delivery history. It is a core NATS publish into
// INTAKE_RECEIPTS, not a JetStream publish: the answer to the provider must
// not wait for it. A receipt lost to a NATS failure undercounts
// delivery_count; it never loses an event.
func (s *Service) sendReceipt(hints map[string]string, key envelope.Key, receivedAt time.Time, code int, answer envelope.Answer) {
	b, err := envelope.MarshalReceipt(envelope.Receipt{
		ID: uuid.NewString(), Key: key, ReceivedAt: receivedAt, Instance: s.instance,
		StatusCode: code, Answer: answer, RetryHints: hints,
	})
	if err == nil {
		err = s.js.Conn().Publish(envelope.SubjectReceipt(key.Integration), b)
	}
	if err != nil {
		s.log.Debug("receipt not sent", "key", key.String(), "err", err)
	}
}
