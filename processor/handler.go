package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
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

	// ObjectID and ObjectVersion are set when the integration extracts them;
	// the processor has already checked the version is not stale.
	ObjectID      string
	ObjectVersion int64

	// ExecutionID identifies this run of the handler (intake.executions).
	// Side effects outside the database take their idempotency key from the
	// scoped key — or from ExecutionID when a re-execution must repeat them.
	ExecutionID string
	// Mode is ModeOriginal, ModeRetry (an exact replay of a failed event) or
	// ModeReexecute (an operator asked to run the handler again).
	Mode inbox.Mode
	// ReplayID and ReplayMode say which replay republished this message, if any.
	ReplayID   string
	ReplayMode inbox.ReplayMode

	// Instance is the ingress instance that accepted the delivery;
	// RetryHints are the provider's retry headers, if it sent any.
	Instance   string
	RetryHints map[string]string

	queue *[]*pgx.QueuedQuery
}

// Execution modes (Event.Mode, intake.executions.mode), named here for
// handler authors.
const (
	ModeOriginal  = inbox.ModeOriginal
	ModeRetry     = inbox.ModeRetry
	ModeReexecute = inbox.ModeReexecute
)

// Queue adds a statement to the event's transaction without a round trip
// of its own: queued statements are sent together with the batch's inbox,
// execution and outbox writes, just before the commit. A handler that only
// writes (INSERT, UPDATE without reading the result) should queue; one that
// must read uses the tx directly. An error in a queued statement fails the
// batch, and the processor isolates the event by splitting the batch, as
// for any database error.
func (ev *Event) Queue(sql string, args ...any) {
	if ev.queue == nil {
		panic("processor: Event.Queue called outside the processor's transaction")
	}
	*ev.queue = append(*ev.queue, &pgx.QueuedQuery{SQL: sql, Arguments: args})
}

// Message is an outbox message a handler emits: committed with the
// transaction, published to INTAKE_OUT by the relay. Its Nats-Msg-Id is
// derived from the event's key and its position in the handler's result
// (envelope.OutboxMsgID), so a handler run again for the same event must
// return the same messages in the same order for INTAKE_OUT to recognise
// them.
type Message struct {
	Subject string
	Header  nats.Header
	Data    []byte
}

// Handler applies one event's business change inside tx, the batch's inbox
// transaction. It runs for an event whose claim is new, for an exact replay of
// a failed or quarantined event (Mode retry) and for an explicit re-execution
// (Mode reexecute); never for a duplicate, a redelivery or a conflict. An
// error undoes only this event's work: the batch commits without it and the
// message is retried with backoff (or failed, for Permanent and Quarantine).
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

// Permanent wraps err so the processor stops retrying the message: its inbox
// row becomes failed with the error, the message is terminated.
func Permanent(err error) error { return fmt.Errorf("%w: %w", ErrPermanent, err) }

// ErrQuarantine marks an event an operator must look at before anything
// runs it again; wrap it with Quarantine.
var ErrQuarantine = errors.New("quarantined")

// Quarantine wraps err so the event's inbox row becomes quarantined.
func Quarantine(err error) error { return fmt.Errorf("%w: %w", ErrQuarantine, err) }

// Any other handler error is retryable: the message is redelivered after the
// configured backoff until max_deliver, then its row becomes failed.

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
