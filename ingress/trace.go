package ingress

import (
	"context"
	"net/http"

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

// traceRequest runs receive on q; traced, inside the request span, which
// ends with the answer's status and the request's outcome. The spans wrap
// the pipeline's steps as middleware wraps a handler — this one receive,
// traceVerify the signature check, tracePublish the publish — and off
// (nil tracer) each is a branch and a direct call: no span, no allocation.
func (s *Service) traceRequest(q *request) int {
	if s.tracer == nil {
		code, _ := s.receive(q)
		return code
	}
	var span trace.Span
	q.r, span = s.startRequest(q.r, q.in)
	code, outcome := s.receive(q)
	endRequest(span, code, outcome)
	return code
}

// traceVerify is v.Verify(d); traced, inside the verify span.
func (s *Service) traceVerify(ctx context.Context, v provider.Verifier, d *provider.Request) (provider.Identity, error) {
	if s.tracer == nil {
		return v.Verify(d)
	}
	_, span := s.tracer.Start(ctx, spanVerify)
	ev, err := v.Verify(d)
	endVerify(span, err)
	return ev, err
}

// tracePublish is publishMsg; traced, inside the publish span, whose
// context msg carries to the processor.
func (s *Service) tracePublish(ctx context.Context, msg *nats.Msg, key envelope.Key, eventType string) (*jetstream.PubAck, error) {
	if s.tracer == nil {
		return s.publishMsg(ctx, msg)
	}
	span := s.startPublish(ctx, msg, key, eventType)
	ack, err := s.publishMsg(ctx, msg)
	endPublish(span, ack, err)
	return ack, err
}

// startRequest starts the request span. It is a new root: a provider's own
// traceparent is not trusted (a sender must not join, or force the sampling
// of, Intake's traces).
func (s *Service) startRequest(r *http.Request, in *integration) (*http.Request, trace.Span) {
	ctx, span := s.tracer.Start(r.Context(), spanRequest, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			telemetry.AttrIntegration.String(in.Name),
			telemetry.AttrTenant.String(in.Tenant),
			attribute.String("http.request.method", r.Method),
			attribute.String("http.route", "/webhooks/{integration}"),
		))
	return r.WithContext(ctx), span
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

// endVerify ends the signature check's span with the check's verdict
// (provider.Reason), never the error text.
func endVerify(span trace.Span, err error) {
	if err != nil {
		reason := provider.Reason(err)
		span.SetAttributes(telemetry.AttrOutcome.String(reason))
		span.SetStatus(codes.Error, reason)
	}
	span.End()
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
