package otlp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/telemetry/otlp"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestNewReadsTheEnvironment(t *testing.T) {
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
			tr, err := otlp.New(context.Background(), otlp.Options{Role: "ingress", LookupEnv: env(tc.env...)})
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

// New's span limits cut a long attribute value: a header a
// publisher wrote never reaches the exporter whole.
func TestSpanLimitsCutLongValues(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithRawSpanLimits(otlp.SpanLimits()), sdktrace.WithSpanProcessor(rec))
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
