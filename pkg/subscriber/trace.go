package subscriber

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/telemetry"
)

// SpanHandle is the span a handler call runs in.
const SpanHandle = "intake.subscriber.handle"

// startHandle starts the handler call's span: a child of the span the
// message's traceparent names (the processor's outbox publish), or on a
// redelivery a new trace linked to it. nil tracer: ctx as is, no span.
func startHandle(ctx context.Context, tracer trace.Tracer, msg jetstream.Msg, m Message) (context.Context, trace.Span) {
	if tracer == nil {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		telemetry.AttrIntegration.String(m.Key.Integration),
		telemetry.AttrTenant.String(m.Tenant),
		telemetry.AttrEventType.String(m.EventType),
		telemetry.AttrKeyHash.String(telemetry.KeyHash(m.Key)),
		telemetry.AttrExecutionID.String(m.ExecutionID),
		telemetry.AttrDelivery.Int64(int64(m.Delivery)),
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.destination.name", m.Subject),
	)}
	switch sc := telemetry.ExtractNATS(msg.Headers()); {
	case !sc.IsValid():
		opts = append(opts, trace.WithNewRoot())
	case m.Delivery > 1:
		opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: sc,
			Attributes: []attribute.KeyValue{attribute.String("intake.link", "original")}}))
	default:
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return tracer.Start(ctx, SpanHandle, opts...)
}

func endHandle(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, "handler failed")
	}
	span.End()
}
