// Package telemetry holds Intake's metrics (prometheus/client_golang) and
// logger setup (log/slog). Metrics live in a Metrics value registered on a
// registry the caller owns, never in package globals, so tests and several
// services in one process (intake dev) do not collide.
package telemetry
