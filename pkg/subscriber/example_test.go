package subscriber_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/subscriber"
)

// A service consumes its tenant's processed events from INTAKE_OUT. Each
// message carries the event's scoped key (m.Key), stable across provider
// retries, replays and re-drives: make the effect idempotent on it, and ack
// only once it is done (Consume acks when the handler returns nil and
// redelivers after the backoff otherwise).
func ExampleConsume() {
	nc, err := nats.Connect(os.Getenv("NATS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	err = subscriber.Consume(ctx, js, subscriber.Options{Durable: "billing", Tenant: "acme"},
		func(ctx context.Context, m subscriber.Message) error {
			log.Printf("%s %s (delivery %d): %d bytes", m.Key, m.EventType, m.Delivery, len(m.Body))
			return nil // e.g. INSERT … ON CONFLICT (event_key) DO NOTHING, keyed by m.Key.String()
		})
	if err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
