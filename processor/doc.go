// Package processor turns INTAKE_IN messages into exactly-once business
// effects.
//
// A Processor pulls from the durable "processor" consumer that every
// processor pod shares. For each message it opens ONE Postgres transaction
// that claims the event's inbox row (INSERT … ON CONFLICT on the scoped key)
// and, only for a new event, runs the domain Handler, whose outbox messages
// are written in the same transaction. It commits, then acks. A crash between
// commit and ack redelivers the message, the claim finds the row, and nothing
// is applied twice.
//
// The Relay publishes committed outbox rows to INTAKE_OUT with Nats-Msg-Id =
// the row id, so a republish after a crash is deduplicated by the stream.
//
// Library users build their own processor binary: write a Handler (it gets
// the event and the pgx.Tx), wrap it in Middleware, and pass it in Options.
package processor
