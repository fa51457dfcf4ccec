// Package stream owns Intake's JetStream topology: the INTAKE_IN and
// INTAKE_OUT streams, the durable "processor" consumer, and an embedded
// nats-server for `intake dev` and tests.
//
// Streams use limits retention, not work-queue: the duplicate window must
// survive restarts and the replayer needs the log after messages are acked.
package stream
