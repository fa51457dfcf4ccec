package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
)

// ErrPayloadGone says an outbox row's payload is no longer INTAKE_IN's to
// read: the message at its sequence is gone (past nats.stream.max_age, or
// deleted by hand), or is not that event's (the stream was made again and
// its sequences started over).
var ErrPayloadGone = errors.New("payload not in INTAKE_IN")

// InPayload reads the body of the event key from INTAKE_IN's message at seq
// (s is INTAKE_IN): an outbox row written without a copy of its payload
// (store.OutboxRow.PayloadSeq, migration 00023). The message must name key
// in its identity headers and its body must hash to its
// Intake-Payload-Sha256, which the processor checked before it applied the
// event: anything else is ErrPayloadGone, never another event's body. It
// returns the body and that hash, which the row does not store either
// (store.OutboxRow.SetStreamPayload).
func InPayload(ctx context.Context, s jetstream.Stream, seq uint64, key envelope.Key) (body []byte, sha string, err error) {
	msg, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, "", fmt.Errorf("%w: no message at sequence %d", ErrPayloadGone, seq)
	}
	if err != nil {
		return nil, "", fmt.Errorf("read INTAKE_IN sequence %d: %w", seq, err)
	}
	h := msg.Header
	if h.Get(envelope.HeaderIntegration) != key.Integration || h.Get(envelope.HeaderAccount) != key.Account ||
		h.Get(envelope.HeaderEventID) != key.EventID {
		return nil, "", fmt.Errorf("%w: sequence %d holds another event than %s", ErrPayloadGone, seq, key)
	}
	sha = h.Get(envelope.HeaderPayloadSHA256)
	if envelope.PayloadSHA256(msg.Data) != sha {
		return nil, "", fmt.Errorf("%w: sequence %d's body does not hash to its %s", ErrPayloadGone, seq, envelope.HeaderPayloadSHA256)
	}
	return msg.Data, sha, nil
}
