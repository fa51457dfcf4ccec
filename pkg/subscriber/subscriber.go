// Package subscriber is for internal services that consume Intake's
// processed events from INTAKE_OUT (intake.out.{tenant}.{integration}.{type}).
//
// Delivery to a subscriber is at least once, like every JetStream consumer:
// a service that must not apply an event twice keys its own change on
// Message.Key (the provider event's scoped key), which every processed
// message carries in Intake-Key. A re-execution an operator asked for
// arrives with a new ExecutionID and the same Key. A message's Nats-Msg-Id
// names it by its event and its position among the handler's outputs
// (envelope.OutboxMsgID): an event run again after a failover lost its commit
// publishes its messages under the same ids, so past INTAKE_OUT's
// duplicate window a service that keys on the message id drops them too.
//
// A service with a Postgres of its own gets one change per event from
// subscribertx.ConsumeTx (package pkg/subscriber/subscribertx, apart so
// that this one links no pgx): it claims the key in the table of Schema in
// the transaction of the change, commits, then acks. Schema states the
// rule for a subscriber in any language (docs/handlers.md).
package subscriber

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/telemetry"
)

// Message is one processed event.
type Message struct {
	Key         envelope.Key
	Tenant      string
	EventType   string
	ExecutionID string
	Subject     string
	Body        []byte
	Delivery    uint64 // JetStream delivery attempt, from 1
	msg         jetstream.Msg
}

// Options configure Consume.
type Options struct {
	// Durable names the consumer; services that share it share the work.
	// Required.
	Durable string
	// Tenant restricts to intake.out.{tenant}.>; "" consumes every tenant.
	Tenant string
	// Subjects, when set, replaces the tenant filter (e.g.
	// "intake.out.acme.stripe-live.invoice%2Epaid").
	Subjects []string
	// AckWait is the consumer's ack deadline. Defaults to DefaultAckWait (30s).
	AckWait time.Duration
	// MaxDeliver bounds deliveries of one message. Defaults to
	// DefaultMaxDeliver (-1: unlimited).
	MaxDeliver int
	// Backoff is the wait before redelivery after a handler error, per
	// delivery; the last value repeats. Defaults to DefaultBackoff()
	// (1s, 5s, 30s).
	Backoff []time.Duration
	// TracerProvider, when set, runs each handler call in a span
	// (intake.subscriber.handle) that continues the event's trace from the
	// message's traceparent — its child on the first delivery, linked to it
	// on a redelivery — so the handler's ctx carries it. nil (the default)
	// is no span.
	TracerProvider trace.TracerProvider
}

// Defaults of Options.
const (
	DefaultAckWait    = 30 * time.Second
	DefaultMaxDeliver = -1
)

// DefaultBackoff is Options.Backoff when unset. A function, so no caller
// can change the default.
func DefaultBackoff() []time.Duration {
	return []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}
}

// WithDefaults returns o with every unset field at its default.
func (o Options) WithDefaults() Options {
	if o.AckWait == 0 {
		o.AckWait = DefaultAckWait
	}
	if o.MaxDeliver == 0 {
		o.MaxDeliver = DefaultMaxDeliver
	}
	if len(o.Backoff) == 0 {
		o.Backoff = DefaultBackoff()
	}
	return o
}

// Validate checks o; errors name the field.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("subscriber: Options."+format, args...))
	}
	if o.Durable == "" {
		bad("Durable: required")
	}
	if o.AckWait <= 0 {
		bad("AckWait: must be positive, got %s", o.AckWait)
	}
	if o.MaxDeliver < 1 && o.MaxDeliver != -1 {
		bad("MaxDeliver: must be at least 1, or -1 for unlimited, got %d", o.MaxDeliver)
	}
	for i, d := range o.Backoff {
		if d <= 0 {
			bad("Backoff[%d]: must be positive, got %s", i, d)
		}
	}
	return errors.Join(errs...)
}

// Handler handles one message; an error redelivers it after the backoff.
type Handler func(ctx context.Context, m Message) error

// Consume creates or updates the durable consumer and handles messages until
// ctx ends. Messages are acked after h returns nil. o's unset fields get
// their defaults (Options.WithDefaults); a bad value is an error.
func Consume(ctx context.Context, js jetstream.JetStream, o Options, h Handler) error {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return err
	}
	subjects := o.Subjects
	if len(subjects) == 0 {
		subjects = []string{envelope.SubjectOutAll}
		if o.Tenant != "" {
			subjects = []string{envelope.SubjectOutPrefix(o.Tenant) + ">"}
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, envelope.StreamOut, jetstream.ConsumerConfig{
		Durable:        o.Durable,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        o.AckWait,
		MaxDeliver:     o.MaxDeliver,
		FilterSubjects: subjects,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // asked to stop while setting up: not a failure
		}
		return fmt.Errorf("subscriber: consumer %s: %w", o.Durable, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("subscriber: %w", err)
	}
	tracer := telemetry.Tracer(o.TracerProvider)
	stop := context.AfterFunc(ctx, it.Drain)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("subscriber: %w", err)
		}
		m, err := parse(msg)
		if err != nil {
			_ = msg.TermWithReason(err.Error())
			continue
		}
		hctx, span := startHandle(context.WithoutCancel(ctx), tracer, msg, m)
		if err := h(hctx, m); err != nil {
			endHandle(span, err)
			i := min(int(m.Delivery)-1, len(o.Backoff)-1)
			_ = msg.NakWithDelay(o.Backoff[max(i, 0)])
			continue
		}
		endHandle(span, nil)
		_ = msg.Ack()
	}
}

func parse(msg jetstream.Msg) (Message, error) {
	h := msg.Headers()
	k, ok := envelope.ParseKey(h.Get(envelope.HeaderKey))
	if !ok {
		return Message{}, fmt.Errorf("not an Intake message: %s missing", envelope.HeaderKey)
	}
	m := Message{
		Key: k, Tenant: h.Get(envelope.HeaderTenant), EventType: h.Get(envelope.HeaderEventType),
		ExecutionID: h.Get(envelope.HeaderExecutionID), Subject: msg.Subject(), Body: msg.Data(), msg: msg,
	}
	if meta, err := msg.Metadata(); err == nil {
		m.Delivery = meta.NumDelivered
	}
	return m, nil
}
