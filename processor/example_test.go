package processor_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/processor"
)

// A Handler applies one event's business change in the inbox's own
// transaction: the payment row and the inbox row commit together or not at
// all, so a redelivered event never inserts twice. Returning messages puts
// them in the outbox of the same transaction.
func ExampleHandlerFunc() {
	payments := processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		if len(ev.Body) == 0 {
			// No retry can fix an empty body: the inbox row becomes failed.
			return nil, processor.Permanent(errors.New("empty body"))
		}
		if _, err := tx.Exec(ctx, `INSERT INTO billing.payments (event_key, body) VALUES ($1, $2)`,
			ev.Key.String(), ev.Body); err != nil {
			return nil, err // retried with backoff; the batch commits without this event
		}
		return []processor.Message{{
			Subject: envelope.SubjectOut(ev.Tenant, ev.Key.Integration, "payment.recorded"),
			Header:  processor.IdentityHeader(ev),
			Data:    ev.Body,
		}}, nil
	})
	// Recover turns a panic into a retryable error; the first middleware
	// is outermost.
	h := processor.Chain(payments, processor.Recover())
	_ = h // give it to intake.Options.Handler (see the intake package's example)
}

// A Router sends each event to the first handler whose pattern matches its
// type (path.Match syntax), optionally for one integration only; the rest
// go to the fallback, Forward by default.
func ExampleRouter() {
	named := func(name string) processor.Handler {
		return processor.HandlerFunc(func(_ context.Context, _ pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
			fmt.Printf("%s: %s %s\n", name, ev.Key.Integration, ev.EventType)
			return nil, nil
		})
	}
	r := processor.NewRouter().
		OnIntegration("stripe-live", "invoice.*", named("invoices")).
		On("customer.subscription.*", named("subscriptions")).
		Fallback(named("everything else"))

	for _, ev := range []*processor.Event{
		{Key: envelope.Key{Integration: "stripe-live", Account: "main", EventID: "evt_1"}, EventType: "invoice.paid"},
		{Key: envelope.Key{Integration: "stripe-test", Account: "main", EventID: "evt_2"}, EventType: "invoice.paid"},
		{Key: envelope.Key{Integration: "stripe-live", Account: "main", EventID: "evt_3"}, EventType: "customer.subscription.updated"},
	} {
		// The processor calls Handle inside the batch's transaction; these
		// handlers use none.
		if _, err := r.Handle(context.Background(), nil, ev); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// invoices: stripe-live invoice.paid
	// everything else: stripe-test invoice.paid
	// subscriptions: stripe-live customer.subscription.updated
}
