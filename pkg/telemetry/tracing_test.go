package telemetry_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/telemetry"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestNewTracingReadsTheEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		enabled bool
		err     string
	}{
		{name: "no endpoint: off"},
		{name: "endpoint", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"}, enabled: true},
		{name: "traces endpoint", env: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"}, enabled: true},
		{name: "grpc", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, enabled: true},
		{name: "disabled", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_SDK_DISABLED", "true"}},
		{name: "exporter none", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER", "none"}},
		{name: "unknown exporter", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER", "zipkin"},
			err: "OTEL_TRACES_EXPORTER"},
		{name: "unknown protocol", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"},
			err: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := telemetry.NewTracing(context.Background(), telemetry.TracingOptions{Role: "ingress", LookupEnv: env(tc.env...)})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tr.Shutdown(context.Background()) }()
			if tr.Enabled() != tc.enabled || (tr.Provider() != nil) != tc.enabled {
				t.Fatalf("enabled = %v (provider %v), want %v", tr.Enabled(), tr.Provider(), tc.enabled)
			}
		})
	}
}

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

// NewTracing's span limits cut a long attribute value: a header a
// publisher wrote never reaches the exporter whole.
func TestSpanLimitsCutLongValues(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithRawSpanLimits(telemetry.SpanLimits()), sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	_, span := tp.Tracer("test").Start(context.Background(), "s", trace.WithAttributes(attribute.String("long", strings.Repeat("x", 7<<20))))
	for i := range 100 {
		span.SetAttributes(attribute.Int(fmt.Sprint("a", i), i))
	}
	span.End()
	s := rec.Ended()[0]
	if v := s.Attributes()[0].Value.AsString(); len(v) != 256 {
		t.Errorf("attribute value of %d bytes exported, want 256", len(v))
	}
	if len(s.Attributes()) != 32 || s.DroppedAttributes() != 69 {
		t.Errorf("%d attributes kept, %d dropped; want 32 and 69", len(s.Attributes()), s.DroppedAttributes())
	}
}
