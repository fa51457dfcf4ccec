package telemetry

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/envelope"
)

// Trace context travels between the roles in one NATS header, W3C
// traceparent (envelope.HeaderTraceparent), never in the body, the
// Nats-Msg-Id or the payload hash: the same delivery traced or not is the
// same message to the dedup window and the inbox. Whoever may publish to
// intake.in.> writes it, so it is read bounded and validated, and a bad one
// is ignored — it never refuses an event — and never copied forward: each
// role writes its own span's. tracestate is neither read nor written.

// InjectNATS sets h's traceparent to sc when sc is sampled; otherwise it
// touches nothing (no header when tracing is off or the trace is not
// sampled).
func InjectNATS(sc trace.SpanContext, h nats.Header) {
	if !sc.IsSampled() || h == nil {
		return
	}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), natsCarrier(h))
}

// ExtractNATS returns the span context h's traceparent names, marked
// remote; an invalid one (no header, too long, malformed, all-zero ids)
// when there is none to continue.
func ExtractNATS(h nats.Header) trace.SpanContext {
	v := h[envelope.HeaderTraceparent]
	if len(v) == 0 || v[0] == "" || len(v[0]) > envelope.MaxTraceparentBytes {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), natsCarrier(h))
	return trace.SpanContextFromContext(ctx)
}

// natsCarrier reads and writes traceparent, by its exact lower-case name
// (nats.Header does not canonicalise keys; http.Header's carrier would write
// "Traceparent").
type natsCarrier nats.Header

func (c natsCarrier) Get(key string) string {
	if key != envelope.HeaderTraceparent {
		return ""
	}
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c natsCarrier) Set(key, value string) {
	if key == envelope.HeaderTraceparent {
		c[key] = []string{value}
	}
}

func (c natsCarrier) Keys() []string { return []string{envelope.HeaderTraceparent} }
