// Package app composes Intake's services into the roles the binary runs:
// ingress, processor (with the outbox relay), the operator API, and dev (all
// of them with an embedded NATS and, when no DATABASE_URL is given, a private
// Postgres). cmd/intake only parses flags and calls in here.
package app
