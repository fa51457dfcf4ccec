// Package store is Intake's Postgres layer: the pgx pool, the migrations
// embedded in the binary, and every query the roles run — the inbox,
// conflicts, rejections and outbox, the delivery history, the purge, the
// replays' audit, the console's overview aggregates and its sessions.
//
// Infrastructure errors are translated at this boundary (pgx.ErrNoRows →
// ErrNotFound; errors.go: Transient, ReadOnly, Unreachable, Refused, Away,
// FromPostgres) so services never import pgx error details to decide. The
// pool drops its connections when the server answers read-only or shutting
// down (Open), and Writable tells readiness whether the database takes
// writes; NewPoolCollector exports the pool's statistics.
package store
