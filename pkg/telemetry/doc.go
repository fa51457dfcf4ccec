// Package telemetry holds Intake's metrics (prometheus/client_golang),
// logger setup (log/slog) and tracing (OpenTelemetry: the OTLP tracer
// provider a role builds from the OTEL_* environment, and the W3C
// traceparent carried in NATS headers; tracing.go, propagation.go). Metrics live in a Metrics value registered on a
// registry the caller owns, never in package globals, so tests and several
// services in one process (intake dev) do not collide. A process registers
// the series of the roles it runs only (NewMetricsFor), plus the collectors
// of its NATS connection and Postgres pool (NATSCollector, PoolCollector).
package telemetry
