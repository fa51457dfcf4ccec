package ingress

import (
	"context"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/telemetry"
)

// Span names and attribute keys of ingress's spans (docs/tracing.md). No
// payloads, headers, secrets or signatures: the integration, its tenant (a
// name from the config), the event type and a hash of the scoped key.
const (
	spanRequest = "intake.ingress.request"
	spanVerify  = "intake.ingress.verify"
	spanPublish = "intake.ingress.publish"
)

// traceRequest runs receive on q; traced, the request span ends with the
// answer's status and the request's outcome. The spans wrap the pipeline's
// steps as middleware wraps a handler — this one receive, traceVerify the
// signature check, tracePublish the publish — and off (nil tracer) each is
// a branch and a direct call: no span, no allocation.
//
// Only a request that reaches its publish is traced (issue 30): the request
// span starts there, back-dated to the request's arrival, with the verify
// span it had by then. A rejection — a bad signature, a rate limit, a body
// over its limit — starts no span: a flood of them would crowd genuine
// deliveries out of the exporter's queue and the sampler's budget. They are
// counted (intake_ingress_rejected_total) and logged (rate-limited).
func (s *Service) traceRequest(q *request) int {
	if s.tracer == nil {
		code, _ := s.receive(q)
		return code
	}
	q.arrival = time.Now()
	code, outcome := s.receive(q)
	if q.span != nil {
		endRequest(q.span, code, outcome)
	}
	return code
}

// traceVerify is v.Verify(d); traced, it notes when the check ran, for the
// verify span the request span gets if the request goes on to its publish.
func (s *Service) traceVerify(q *request, v provider.Verifier, d *provider.Request) (provider.Identity, error) {
	if s.tracer == nil {
		return v.Verify(d)
	}
	q.verifyStart = time.Now()
	ev, err := v.Verify(d)
	q.verifyEnd = time.Now()
	return ev, err
}

// tracePublish is publishMsg; traced, it starts q's request span (and its
// verify span) and runs the publish inside the publish span, whose context
// msg carries to the processor.
func (s *Service) tracePublish(ctx context.Context, q *request, msg *nats.Msg, key envelope.Key, eventType string) (*jetstream.PubAck, error) {
	if s.tracer == nil {
		return s.publishMsg(ctx, msg)
	}
	if q.span == nil {
		s.startRequest(q)
	}
	span := s.startPublish(trace.ContextWithSpan(ctx, q.span), msg, key, eventType)
	ack, err := s.publishMsg(ctx, msg)
	endPublish(span, ack, err)
	return ack, err
}

// startRequest starts q's request span at q.arrival, and the verify span
// inside it at the times traceVerify noted; q.r's context then carries the
// request span (for the log lines' trace_id). It is a new root: a
// provider's own traceparent is not trusted (a sender must not join, or
// force the sampling of, Intake's traces).
func (s *Service) startRequest(q *request) {
	ctx, span := s.tracer.Start(q.r.Context(), spanRequest, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(q.arrival),
		trace.WithAttributes(
			telemetry.AttrIntegration.String(q.in.Name),
			telemetry.AttrTenant.String(q.in.Tenant),
			attribute.String("http.request.method", q.r.Method),
			attribute.String("http.route", "/webhooks/{integration}"),
		))
	if !q.verifyStart.IsZero() {
		_, v := s.tracer.Start(ctx, spanVerify, trace.WithTimestamp(q.verifyStart))
		v.End(trace.WithTimestamp(q.verifyEnd))
	}
	q.span, q.r = span, q.r.WithContext(ctx)
}

// endRequest records the answer's status and what became of the request
// (accepted, duplicate, a rejection's reason) on the request span and ends
// it.
func endRequest(span trace.Span, code int, outcome string) {
	span.SetAttributes(telemetry.AttrOutcome.String(outcome), attribute.Int("http.response.status_code", code))
	if code >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(code))
	}
	span.End()
}

// logArgs is args for a log line about the request, with its trace_id
// when the request is traced. Off, args comes back as is: no attribute is
// boxed, so a rejection's log line costs what it did before tracing.
func (s *Service) logArgs(ctx context.Context, args ...any) []any {
	if s.tracer == nil {
		return args
	}
	return telemetry.AppendTraceID(args, trace.SpanContextFromContext(ctx))
}

// startPublish starts the publish span and writes its context into msg's
// traceparent (when sampled).
func (s *Service) startPublish(ctx context.Context, msg *nats.Msg, key envelope.Key, eventType string) trace.Span {
	_, span := s.tracer.Start(ctx, spanPublish, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.destination.name", msg.Subject),
		telemetry.AttrKeyHash.String(telemetry.KeyHash(key)),
		telemetry.AttrEventType.String(eventType),
	))
	telemetry.InjectNATS(span.SpanContext(), msg.Header)
	return span
}

// endPublish ends the publish span: intake.duplicate says the stream's
// window stopped the message.
func endPublish(span trace.Span, ack *jetstream.PubAck, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "publish failed")
	} else {
		span.SetAttributes(attribute.Bool("intake.duplicate", ack.Duplicate), telemetry.AttrStreamSeq.Int64(int64(ack.Sequence)))
	}
	span.End()
}
