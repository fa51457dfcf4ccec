// Package store is Intake's Postgres layer: the pgx pool, the migrations
// embedded in the binary, and the inbox, conflict and outbox queries.
//
// Infrastructure errors are translated at this boundary (pgx.ErrNoRows →
// ErrNotFound) so services never import pgx error details to decide.
package store
