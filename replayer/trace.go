package replayer

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
)

// spanRepublish is the span of one message a replay or redelivery
// republishes (docs/tracing.md).
const spanRepublish = "intake.replayer.republish"

// startRepublish prepares a copy's trace context. The copy never carries
// the original's traceparent: a replay is a new attempt, so it starts a
// trace of its own — a republish span LINKED to the original's trace, not
// its child — and the copy carries that span's context (nothing when
// tracing is off). The processor and subscribers continue from it.
func (j *job) startRepublish(msg *nats.Msg, it store.ReplayItem) trace.Span {
	orig := telemetry.ExtractNATS(msg.Header)
	// nats.Header keeps keys as written: a "Traceparent" is stripped too,
	// so no spelling of it rides along on the copy.
	for k := range msg.Header {
		if strings.EqualFold(k, envelope.HeaderTraceparent) {
			delete(msg.Header, k)
		}
	}
	if j.tracer == nil {
		return nil
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		telemetry.AttrReplayID.String(j.rep.ID),
		telemetry.AttrReplayMode.String(j.rep.Mode),
		telemetry.AttrKeyHash.String(telemetry.KeyHash(it.Key)),
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.destination.name", msg.Subject),
	)}
	if orig.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: orig,
			Attributes: []attribute.KeyValue{attribute.String("intake.link", "original")}}))
	}
	_, span := j.tracer.Start(context.Background(), spanRepublish, opts...)
	telemetry.InjectNATS(span.SpanContext(), msg.Header)
	return span
}

// endRepublish ends a copy's span once its publish is settled.
func endRepublish(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, "publish failed")
	}
	span.End()
}
