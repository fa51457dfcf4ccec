package subscriber

import _ "embed" // Schema

// Schema is the SQL contract of a subscriber's inbox (schema.sql): schema
// intake_subscriber with the tables handled, one row per (consumer, key), and
// handled_executions, one row per (consumer, key, execution_id) for a
// subscriber that applies re-executions again. Its comment states the rule
// every subscriber follows, in any language: claim the key with INSERT … ON
// CONFLICT DO NOTHING RETURNING in the transaction that makes the change,
// commit, then ack. The statements are idempotent. subscribertx.ConsumeTx
// follows the rule in Go; `intake subscriber schema` prints it.
//
//go:embed schema.sql
var Schema string
