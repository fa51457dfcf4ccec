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
// After the commit the processor publishes the batch's outbox rows to
// INTAKE_OUT with Nats-Msg-Id = the row id and takes them off the pending
// list. The Relay publishes the rows that stay pending (the processor died or
// lost NATS first); a row published twice is deduplicated by the stream.
//
// Library users build their own processor binary: write a Handler (it gets
// the event and the pgx.Tx), wrap it in Middleware, and pass it in Options.
package processor
