// Package subscribertx makes a subscriber's change happen once per processed
// event: it follows the inbox rule of subscriber.Schema in Go, with pgx.
//
// For each message from INTAKE_OUT, ConsumeTx opens a transaction on the
// subscriber's own database, claims the message's key there (INSERT … ON
// CONFLICT DO NOTHING RETURNING into intake_subscriber.handled), runs the
// handler in the same transaction, commits, and only then acks. A
// redelivery — the subscriber died after its commit and before its ack, the
// ack was lost, a re-drive — finds the key claimed: nothing is changed and
// the message is acked. A handler error rolls the claim back with the change,
// and the message is redelivered after the backoff.
//
// It is a package of its own so that pkg/subscriber, which a service in
// another team's repository imports, links no pgx.
package subscribertx

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/subscriber"
)

// Options configure ConsumeTx: subscriber.Options (Durable also names the
// consumer in the inbox table) and how re-executions are treated.
type Options struct {
	subscriber.Options
	// Reexecute, when set, applies an operator's re-execution (a new
	// Intake-Execution-Id, the same Intake-Key) again: the claim is on
	// (consumer, key, execution_id), in intake_subscriber.handled_executions.
	// Unset (the default), the claim is on (consumer, key), in
	// intake_subscriber.handled, and a re-execution is acked unapplied.
	// Keep one setting per Durable: the two are claimed in different tables.
	Reexecute bool
}

// Handler makes the subscriber's change for m in tx. An error rolls it back
// and redelivers m after the backoff.
type Handler func(ctx context.Context, tx pgx.Tx, m subscriber.Message) error

const (
	claimKey = `INSERT INTO intake_subscriber.handled (consumer, key, execution_id)
VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING key`
	claimExecution = `INSERT INTO intake_subscriber.handled_executions (consumer, key, execution_id)
VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING key`
)

// EnsureSchema applies subscriber.Schema to the database behind pool; it
// is idempotent.
func EnsureSchema(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, subscriber.Schema); err != nil {
		return fmt.Errorf("subscribertx: apply schema: %w", err)
	}
	return nil
}

// ConsumeTx consumes as subscriber.Consume does and runs h once per key (or
// per execution, with Options.Reexecute) in a transaction on pool that
// also claims it: claimed already → commit nothing, ack; h fails → roll
// back, nak with the backoff; otherwise commit, then ack. Without the
// schema's table (EnsureSchema or `intake subscriber schema`) it refuses to
// start.
func ConsumeTx(ctx context.Context, js jetstream.JetStream, pool *pgxpool.Pool, o Options, h Handler) error {
	if pool == nil {
		return errors.New("subscribertx: pool: required")
	}
	claim, table := claimKey, "intake_subscriber.handled"
	if o.Reexecute {
		claim, table = claimExecution, "intake_subscriber.handled_executions"
	}
	// Refused now rather than a nak per message, for ever, without its table.
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		if ctx.Err() != nil {
			return nil // asked to stop while setting up: not a failure
		}
		return fmt.Errorf("subscribertx: check %s: %w", table, err)
	}
	if !exists {
		return fmt.Errorf("subscribertx: table %s does not exist: apply subscriber.Schema (EnsureSchema, or `intake subscriber schema`)", table)
	}
	return subscriber.Consume(ctx, js, o.Options, func(ctx context.Context, m subscriber.Message) error {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var key string
			err := tx.QueryRow(ctx, claim, o.Durable, m.Key.String(), m.ExecutionID).Scan(&key)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // handled before: commit nothing, ack
			}
			if err != nil {
				return fmt.Errorf("claim: %w", err)
			}
			return h(ctx, tx, m)
		})
		if err != nil {
			return fmt.Errorf("subscribertx: %s: %w", m.Key, err)
		}
		return nil
	})
}
