package processor

import (
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
)

// decode reads the identity ingress wrote into the headers.
func decode(msg jetstream.Msg) (*Event, error) {
	d, err := envelope.ParseDelivery(msg.Headers(), msg.Data())
	if err != nil {
		return nil, err
	}
	meta, err := msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrBadEnvelope, err)
	}
	if d.ReceivedAt.IsZero() {
		d.ReceivedAt = meta.Timestamp
	}
	return &Event{
		Key:           d.Key,
		Tenant:        d.Tenant,
		EventType:     d.EventType,
		PayloadSHA256: d.PayloadSHA256,
		ReceivedAt:    d.ReceivedAt,
		StreamSeq:     meta.Sequence.Stream,
		Delivery:      meta.NumDelivered,
		Header:        msg.Headers(),
		Body:          d.Body,
		ObjectID:      d.ObjectID,
		ObjectVersion: d.ObjectVersion,
		ReplayID:      d.ReplayID,
		ReplayMode:    d.ReplayMode,
		Instance:      d.Instance,
		RetryHints:    d.RetryHints,
	}, nil
}
