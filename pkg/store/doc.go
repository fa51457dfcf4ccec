// Package store is Intake's Postgres layer: the pgx pool, the migrations
// embedded in the binary, and the inbox, conflict and outbox queries.
//
// Infrastructure errors are translated at this boundary (pgx.ErrNoRows →
// ErrNotFound; errors.go: Transient, ReadOnly, Unreachable, Refused) so
// services never import pgx error details to decide. The pool drops its
// connections when the server answers read-only or shutting down (Open),
// and Writable tells readiness whether the database takes writes.
package store
