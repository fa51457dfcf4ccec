// Package subscriber is for internal services that consume Intake's
// processed events from INTAKE_OUT (intake.out.{tenant}.{integration}.{type}).
//
// Delivery to a subscriber is at least once, like every JetStream consumer:
// a service that must not apply an event twice keys its own change on
// Message.Key (the provider event's scoped key), which every processed
// message carries in Intake-Key. A re-execution an operator asked for
// arrives with a new ExecutionID and the same Key.
package subscriber

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
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
	// "intake.out.acme.stripe-live.invoice_paid").
	Subjects []string
	// AckWait defaults to 30s; MaxDeliver to -1 (unlimited).
	AckWait    time.Duration
	MaxDeliver int
	// Backoff after a handler error; defaults to 1s, 5s, 30s.
	Backoff []time.Duration
}

// Handler handles one message; an error redelivers it after the backoff.
type Handler func(ctx context.Context, m Message) error

// Consume creates or updates the durable consumer and handles messages until
// ctx ends. Messages are acked after h returns nil.
func Consume(ctx context.Context, js jetstream.JetStream, o Options, h Handler) error {
	if o.Durable == "" {
		return errors.New("subscriber: Options.Durable is required")
	}
	subjects := o.Subjects
	if len(subjects) == 0 {
		subjects = []string{envelope.SubjectOutAll}
		if o.Tenant != "" {
			subjects = []string{"intake.out." + envelope.Token(o.Tenant) + ".>"}
		}
	}
	if o.AckWait == 0 {
		o.AckWait = 30 * time.Second
	}
	if o.MaxDeliver == 0 {
		o.MaxDeliver = -1
	}
	if len(o.Backoff) == 0 {
		o.Backoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, envelope.StreamOut, jetstream.ConsumerConfig{
		Durable:        o.Durable,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        o.AckWait,
		MaxDeliver:     o.MaxDeliver,
		FilterSubjects: subjects,
	})
	if err != nil {
		return fmt.Errorf("subscriber: consumer %s: %w", o.Durable, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("subscriber: %w", err)
	}
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
		if err := h(context.WithoutCancel(ctx), m); err != nil {
			i := min(int(m.Delivery)-1, len(o.Backoff)-1)
			_ = msg.NakWithDelay(o.Backoff[max(i, 0)])
			continue
		}
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
