package telemetry_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/telemetry"
)

func TestTraceparentInNATSHeaders(t *testing.T) {
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled})
	h := nats.Header{}
	telemetry.InjectNATS(sampled, h)
	want := "00-01020300000000000000000000000000-0405060000000000-01"
	if got := h[envelope.HeaderTraceparent]; len(got) != 1 || got[0] != want || len(h) != 1 {
		t.Fatalf("injected %v, want only traceparent %s (lower-case key)", h, want)
	}
	if got := telemetry.ExtractNATS(h); !got.IsRemote() || got.TraceID() != sampled.TraceID() || got.SpanID() != sampled.SpanID() || !got.IsSampled() {
		t.Fatalf("extracted %+v", got)
	}

	unsampled := sampled.WithTraceFlags(0)
	h = nats.Header{}
	telemetry.InjectNATS(unsampled, h)
	telemetry.InjectNATS(trace.SpanContext{}, h)
	if len(h) != 0 {
		t.Fatalf("an unsampled or invalid span wrote %v", h)
	}

	for name, v := range map[string]string{
		"empty":        "",
		"garbage":      "not a traceparent",
		"zero trace":   "00-00000000000000000000000000000000-0405060000000000-01",
		"upper case":   "00-0102030000000000000000000000000A-0405060000000000-01",
		"v00 trailing": want + "-extra",
		"too long":     "01-01020300000000000000000000000000-0405060000000000-01-" + strings.Repeat("x", envelope.MaxTraceparentBytes),
		"version ff":   "ff-01020300000000000000000000000000-0405060000000000-01",
	} {
		if got := telemetry.ExtractNATS(nats.Header{envelope.HeaderTraceparent: {v}}); got.IsValid() {
			t.Errorf("%s: %q extracted as %+v, want ignored", name, v, got)
		}
	}
	// Canonicalised spellings are not ours: ingress and the processor
	// write the lower-case key only.
	if got := telemetry.ExtractNATS(nats.Header{"Traceparent": {want}}); got.IsValid() {
		t.Errorf("Traceparent (canonical case) was read")
	}
}

func TestTracingHelpersAllocateNothingWhenOff(t *testing.T) {
	h := nats.Header{envelope.HeaderKey: {"demo/main/evt_1"}}
	if n := testing.AllocsPerRun(100, func() {
		telemetry.InjectNATS(trace.SpanContext{}, h)
		_ = telemetry.ExtractNATS(h)
		_ = telemetry.AppendTraceID(nil, trace.SpanContext{})
		_ = telemetry.Tracer(nil)
	}); n != 0 {
		t.Fatalf("%v allocations, want 0", n)
	}
}
