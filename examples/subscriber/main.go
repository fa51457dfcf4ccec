// Command subscriber is an internal service consuming Intake's processed
// events for one tenant. It records each event once in its own database
// (table example_subscriber.events): subscribertx.ConsumeTx claims the
// event's key in intake_subscriber.handled in the same transaction as the
// insert, commits, then acks, so a redelivery (at-least-once to
// subscribers) changes nothing. It needs a Postgres of its own, DATABASE_URL
// (it applies the inbox schema, subscriber.Schema, at start).
//
//	go run ./cmd/intake dev                                  # terminal 1
//	DATABASE_URL=postgres://… go run ./examples/subscriber   # terminal 2
//	go run ./cmd/intake send --integration demo              # terminal 3
//
// -reexecute applies an operator's re-execution (same key, new execution
// id) again; by default it is acked unapplied.
//
// Against a NATS server running deploy/nats/intake.conf, dial as its
// "subscriber" user: INTAKE_NATS_USER=subscriber INTAKE_NATS_PASSWORD=…
// (the user may only receive replies on its own inbox, _INBOX_subscriber).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/subscriber"
	"github.com/intakehq/intake/pkg/subscriber/subscribertx"
)

const eventsTable = `CREATE SCHEMA IF NOT EXISTS example_subscriber;
CREATE TABLE IF NOT EXISTS example_subscriber.events (
    key text, execution_id text, event_type text, body jsonb, received_at timestamptz DEFAULT now())`

func main() {
	url := flag.String("nats", nats.DefaultURL, "NATS server")
	tenant := flag.String("tenant", "acme", "tenant whose events to consume")
	reexecute := flag.Bool("reexecute", false, "apply an operator's re-execution (same key, new execution id) again")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" {
		log.Fatal("DATABASE_URL: required (the subscriber's own Postgres, where it records what it handled)")
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := subscribertx.EnsureSchema(ctx, pool); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, eventsTable); err != nil {
		log.Fatal(err)
	}

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
	o := subscribertx.Options{Options: subscriber.Options{Durable: "example-subscriber", Tenant: *tenant}, Reexecute: *reexecute}
	err = subscribertx.ConsumeTx(ctx, js, pool, o, func(ctx context.Context, tx pgx.Tx, m subscriber.Message) error {
		// Runs once per key (per execution with -reexecute): a redelivery
		// finds the key claimed and is acked without calling this.
		body := m.Body
		if !json.Valid(body) {
			body = []byte("null")
		}
		if _, err := tx.Exec(ctx, `INSERT INTO example_subscriber.events (key, execution_id, event_type, body) VALUES ($1, $2, $3, $4)`,
			m.Key.String(), m.ExecutionID, m.EventType, body); err != nil {
			return err
		}
		fmt.Printf("%s %s (execution %s): %d bytes\n", m.Key, m.EventType, m.ExecutionID, len(m.Body))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
