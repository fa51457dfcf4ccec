package processor

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake/pkg/envelope"
)

// Message is an outbox message a handler emits: written to the outbox in
// the batch's transaction and, once it commits, published to INTAKE_OUT by
// the processor itself; the Relay publishes it only if it is still pending
// after outbox.relay_after (that publish failed, or the processor died
// first). Its Nats-Msg-Id is derived from the event's key and its position
// in the handler's result (envelope.OutboxMsgID), so a handler run again for
// the same event must return the same messages in the same order for
// INTAKE_OUT to recognise them.
type Message struct {
	Subject string
	Header  nats.Header
	Data    []byte
}

// Handler applies one event's business change inside tx, the batch's inbox
// transaction. It runs for an event whose claim is new, for an exact replay of
// a failed or quarantined event (Mode retry) and for an explicit re-execution
// (Mode reexecute); never for a duplicate, a redelivery or a conflict. An
// error undoes only this event's work: the batch commits without it. An
// error wrapped by Permanent or Quarantine ends the event there (its row
// failed or quarantined); any other is retried: the message is redelivered
// after the configured backoff until max_deliver, then its row becomes
// failed.
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

// ErrorClass names the kind of a handler error for operators (an attempt's
// error_class): "quarantine" and "permanent" for the handler's verdicts,
// "timeout" for a deadline (processor.handler_timeout, a statement
// timeout), "sql <SQLSTATE>" for an error Postgres raised (a SQL handler's
// RAISE, a constraint), else "error".
func ErrorClass(err error) string {
	var pg *pgconn.PgError
	switch {
	case errors.Is(err, ErrQuarantine):
		return "quarantine"
	case errors.Is(err, ErrPermanent):
		return "permanent"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &pg):
		if pg.Code == "57014" { // query_canceled: statement_timeout
			return "timeout"
		}
		return "sql " + pg.Code
	}
	return "error"
}
