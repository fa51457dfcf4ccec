// Package telemetry holds Intake's metrics (prometheus/client_golang) and
// logger setup (log/slog). Metrics live in a Metrics value registered on a
// registry the caller owns, never in package globals, so tests and several
// services in one process (intake dev) do not collide. A process registers
// the series of the roles it runs only (NewMetricsFor), plus the collectors
// of its NATS connection and Postgres pool (NATSCollector, PoolCollector).
package telemetry
