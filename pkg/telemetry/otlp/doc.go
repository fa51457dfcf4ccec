// Package otlp builds a role's OpenTelemetry tracer provider from the
// standard OTEL_* environment: OTLP over HTTP/protobuf by default, gRPC when
// asked, off unless an endpoint is configured (New). cmd/intake builds one
// per role and hands its Provider to the services; an embedding program may
// do the same or pass a TracerProvider of its own.
package otlp
