// Command subscriber is an internal service consuming Intake's processed
// events for one tenant. It keeps its own record of handled keys so a
// redelivered message (at-least-once to subscribers) changes nothing.
//
//	go run ./cmd/intake dev                      # terminal 1
//	go run ./examples/subscriber                 # terminal 2
//	go run ./cmd/intake send --integration demo  # terminal 3
//
// Against a NATS server running deploy/nats/intake.conf, dial as its
// "subscriber" user: INTAKE_NATS_USER=subscriber INTAKE_NATS_PASSWORD=…
// (the user may only receive replies on its own inbox, _INBOX_subscriber).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/subscriber"
)

func main() {
	url := flag.String("nats", nats.DefaultURL, "NATS server")
	tenant := flag.String("tenant", "acme", "tenant whose events to consume")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	opts := []nats.Option{nats.Name("example-subscriber"), nats.CustomInboxPrefix("_INBOX_subscriber")}
	if user := os.Getenv("INTAKE_NATS_USER"); user != "" {
		opts = append(opts, nats.UserInfo(user, os.Getenv("INTAKE_NATS_PASSWORD")))
	}
	nc, err := nats.Connect(*url, opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{} // a real service keeps this in its database, in the same transaction as its change
	err = subscriber.Consume(ctx, js, subscriber.Options{Durable: "example-subscriber", Tenant: *tenant},
		func(_ context.Context, m subscriber.Message) error {
			mu.Lock()
			defer mu.Unlock()
			// One effect per execution: a redelivery of the same message is
			// skipped; an operator's re-execution (new ExecutionID, same Key)
			// applies again, as asked.
			if seen[m.ExecutionID] {
				return nil // already handled: ack and move on
			}
			seen[m.ExecutionID] = true
			fmt.Printf("%s %s (execution %s): %d bytes\n", m.Key, m.EventType, m.ExecutionID, len(m.Body))
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}
}
