// Package telemetry holds what every role and library shares to be
// observed: metrics (prometheus/client_golang), logger setup (log/slog),
// the span attributes and tracer of Intake's spans (tracing.go) and the
// W3C traceparent carried in NATS headers (propagation.go). Metrics live in
// a Metrics value registered on a registry the caller owns, never in
// package globals, so tests and several services in one process (intake
// dev) do not collide. A process registers the series of the roles it runs
// only (NewMetricsFor), plus the collectors of its NATS connection
// (NATSCollector) and Postgres pool (store.NewPoolCollector).
//
// Building a tracer provider from the OTEL_* environment, with its OTLP
// exporter and the gRPC and protobuf code that come with it, is package
// otlp below: a library that only reads spans' context (pkg/subscriber)
// does not link it.
package telemetry
