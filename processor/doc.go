// Package processor turns INTAKE_IN messages into exactly-once business
// effects.
//
// A Processor pulls from the durable "processor" consumer that every
// processor pod shares and collects messages into batches (up to
// processor.batch_size, or what arrived within processor.batch_wait). Each
// batch is ONE Postgres transaction (group commit): it first checks every
// envelope against the configured integrations and the replays recorded in
// Postgres (trust.go; what fails is recorded in intake.rejected_messages and
// terminated, never applied), then claims every other event's
// inbox row in one statement (INSERT … ON CONFLICT on the scoped key), decides
// each message's fate from the claim (new, duplicate, redelivery, conflict,
// replay), and runs the domain Handler for the events that apply, whose
// outbox messages are written in the same transaction. It commits, then acks
// every message of the batch. A crash between commit and ack redelivers the
// messages, the claim finds the rows, and nothing is applied twice. A handler
// that fails is isolated: the batch commits without it and its message is
// redelivered with backoff.
//
// After the commit the processor publishes the batch's outbox rows to
// INTAKE_OUT and takes them off the pending list. The Relay publishes the
// rows that stay pending (the processor died or lost NATS first); a row
// published twice is deduplicated by the stream. A row's Nats-Msg-Id is not
// its id but envelope.OutboxMsgID: derived from the event's key and the
// message's position among its handler's outputs (plus the replay, for a
// re-execution), so an event executed again after a Postgres failover lost
// its commit publishes under the same ids and is dropped as a duplicate.
//
// A database that is away or takes no writes is waited out, never blamed
// on the events (store.Transient): on a refused connection, a server
// shutting down, a read-only server (a standby, or an old primary back
// after a failover), a standby's recovery conflict or a connection lost
// during COMMIT, the batch stays unacked with its ack deadlines extended and
// its transaction is retried in place until it commits. Every message is
// kept in progress from the moment its batch is formed, and once every
// worker waits out the database (store.Away: unreachable, read-only, the
// connection lost — not a lost race, a slow statement or a handler's own
// timeout) the collector stops the pull and keeps
// what nats.go had prefetched in progress too (collect.go), so no delivery
// is used up however long the outage lasts. Only a shutdown during the
// outage costs one: it naks the batches, and another processor takes them.
// The store drops its pool's connections
// on a read-only answer, so a multi-host DSN with
// target_session_attrs=read-write finds the promoted primary. A COMMIT of
// unknown outcome is resolved by the inbox on the retry: if it committed,
// the claim finds the rows and the messages are acked, no handler run twice.
//
// The stock binary runs the configuration's SQL handlers (handlers:,
// SQLRouter): each a statement with named parameters (:key, :body, …,
// sqlparams.go) prepared at start, under a role that must hold nothing on
// the intake schema, and run in the batch's transaction like a Go handler;
// rows it returns with a payload column become outbox messages, a statement
// without one is queued with the batch's writes. IK001 and IK002 raised by
// it fail or quarantine the event.
//
// Library users build their own processor binary: write a Handler (it gets
// the event and the pgx.Tx), wrap it in Middleware, and pass it in Options.
package processor
