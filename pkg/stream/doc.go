// Package stream owns Intake's JetStream topology and how a role reaches it:
//
//   - the streams: INTAKE_IN (verified deliveries), INTAKE_OUT (processed
//     events for subscribers) and INTAKE_RECEIPTS (deliveries that did not
//     become a stream message), created or updated by Ensure (topology.go);
//   - the durable pull consumers: "processor" on INTAKE_IN and the receipts
//     folder's on INTAKE_RECEIPTS, one pair per processor shard
//     (ProcessorDurable, ReceiptsDurable);
//   - Connect and Options: a role's NATS connection with its credentials,
//     TLS and inbox prefix (connect.go);
//   - Check and Compare: a running stream against the configuration, so a
//     role refuses a stream it would misuse (check.go), and the server
//     version it needs (version.go).
//
// Streams use limits retention, not work-queue: the duplicate window must
// survive restarts and the replayer needs the log after messages are acked.
// The embedded nats-server for `intake dev` and tests is harness code
// (internal/harness/natsserver).
package stream
