package subscribertx_test

import (
	"context"
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

// A service records each of its tenant's payments once in its own
// database: the handler's insert commits with the claim of the event's key,
// and the message is acked after the commit, so a redelivery changes
// nothing.
func ExampleConsumeTx() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := subscribertx.EnsureSchema(ctx, pool); err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(os.Getenv("NATS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}

	o := subscribertx.Options{Options: subscriber.Options{Durable: "billing", Tenant: "acme"}}
	err = subscribertx.ConsumeTx(ctx, js, pool, o, func(ctx context.Context, tx pgx.Tx, m subscriber.Message) error {
		_, err := tx.Exec(ctx, `INSERT INTO billing.payments (event_key, body) VALUES ($1, $2)`, m.Key.String(), m.Body)
		return err
	})
	if err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
