package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake/pkg/envelope"
)

// Event is one verified provider delivery as the handler sees it.
type Event struct {
	Key           envelope.Key
	Tenant        string
	EventType     string
	PayloadSHA256 string
	ReceivedAt    time.Time
	StreamSeq     uint64 // sequence in INTAKE_IN
	Delivery      uint64 // JetStream delivery attempt, from 1
	Header        nats.Header
	Body          []byte // raw bytes as received
}

// Message is an outbox message a handler emits: committed with the
// transaction, published to INTAKE_OUT by the relay.
type Message struct {
	Subject string
	Header  nats.Header
	Data    []byte
}

// Handler applies one new event's business change inside tx. It runs only
// for events whose inbox claim is new; returning an error rolls the whole
// transaction back, claim included.
type Handler interface {
	Handle(ctx context.Context, tx pgx.Tx, ev *Event) ([]Message, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, tx pgx.Tx, ev *Event) ([]Message, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, tx pgx.Tx, ev *Event) ([]Message, error) {
	return f(ctx, tx, ev)
}

// Middleware wraps a Handler (recovery, metrics, tracing) so cross-cutting
// concerns never touch business handlers.
type Middleware func(Handler) Handler

// Chain wraps h in mws, the first outermost.
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// ErrPermanent marks an error that no retry can fix; wrap it with Permanent.
var ErrPermanent = errors.New("permanent")

// Permanent wraps err so the processor stops retrying the message.
func Permanent(err error) error { return fmt.Errorf("%w: %w", ErrPermanent, err) }

// Forward is the built-in handler: it forwards the event unchanged to
// intake.out.{tenant}.{integration}.{event_type} with the identity headers,
// so a subscriber has its idempotency key (Intake-Key).
func Forward() Handler {
	return HandlerFunc(func(_ context.Context, _ pgx.Tx, ev *Event) ([]Message, error) {
		return []Message{{
			Subject: envelope.SubjectOut(ev.Tenant, ev.Key.Integration, ev.EventType),
			Header:  IdentityHeader(ev),
			Data:    ev.Body,
		}}, nil
	})
}

// IdentityHeader is the set of Intake-* headers every processed message carries.
func IdentityHeader(ev *Event) nats.Header {
	return nats.Header{
		envelope.HeaderKey:           {ev.Key.String()},
		envelope.HeaderIntegration:   {ev.Key.Integration},
		envelope.HeaderTenant:        {ev.Tenant},
		envelope.HeaderAccount:       {ev.Key.Account},
		envelope.HeaderEventID:       {ev.Key.EventID},
		envelope.HeaderEventType:     {ev.EventType},
		envelope.HeaderPayloadSHA256: {ev.PayloadSHA256},
		envelope.HeaderReceivedAt:    {ev.ReceivedAt.UTC().Format(time.RFC3339Nano)},
	}
}
