package processor

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
)

var errBadEnvelope = errors.New("message lacks Intake headers")

// decode reads the identity ingress wrote into the headers. The body is not
// parsed: it is the provider's raw bytes.
func decode(msg jetstream.Msg) (*Event, error) {
	h := msg.Headers()
	key, ok := envelope.ParseKey(h.Get(envelope.HeaderKey))
	if !ok {
		return nil, fmt.Errorf("%w: %s missing or invalid", errBadEnvelope, envelope.HeaderKey)
	}
	tenant := h.Get(envelope.HeaderTenant)
	sha := h.Get(envelope.HeaderPayloadSHA256)
	if tenant == "" || sha == "" {
		return nil, fmt.Errorf("%w: tenant or payload hash missing", errBadEnvelope)
	}
	if got := envelope.PayloadSHA256(msg.Data()); got != sha {
		return nil, fmt.Errorf("%w: body does not match %s", errBadEnvelope, envelope.HeaderPayloadSHA256)
	}
	meta, err := msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBadEnvelope, err)
	}
	received, err := time.Parse(time.RFC3339Nano, h.Get(envelope.HeaderReceivedAt))
	if err != nil {
		received = meta.Timestamp
	}
	return &Event{
		Key:           key,
		Tenant:        tenant,
		EventType:     h.Get(envelope.HeaderEventType),
		PayloadSHA256: sha,
		ReceivedAt:    received,
		StreamSeq:     meta.Sequence.Stream,
		Delivery:      meta.NumDelivered,
		Header:        h,
		Body:          msg.Data(),
	}, nil
}
