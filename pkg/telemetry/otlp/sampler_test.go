package otlp_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/telemetry/otlp"
)

// A remote parent is a message's traceparent, written by whoever publishes
// it: under the parent-based samplers its flags decide nothing (a forged
// 00 cannot hide a message, a forged 01 cannot force one in), while a
// local parent's decision is followed as the SDK's own sampler does.
func TestSamplerRedecidesRemoteParents(t *testing.T) {
	remote := func(sampled bool) context.Context {
		flags := trace.TraceFlags(0)
		if sampled {
			flags = trace.FlagsSampled
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6},
			TraceFlags: flags, Remote: true})
		return trace.ContextWithRemoteSpanContext(context.Background(), sc)
	}
	for _, c := range []struct {
		sampler, arg string
		parent       context.Context
		want         bool
	}{
		{"", "", remote(false), true},                                  // default parentbased_always_on: a forged 00 is still traced
		{"parentbased_always_on", "", remote(false), true},             //
		{"parentbased_traceidratio", "0", remote(true), false},         // a forged 01 is not forced in
		{"parentbased_traceidratio", "1", remote(false), true},         //
		{"parentbased_always_off", "", remote(true), false},            //
		{"always_on", "", remote(false), true},                         //
		{"traceidratio", "0", remote(true), false},                     //
		{"parentbased_traceidratio", "0", context.Background(), false}, // a root: the ratio
		{"parentbased_always_on", "", context.Background(), true},      //
	} {
		s, err := otlp.Sampler(env(otlp.EnvTracesSampler, c.sampler, otlp.EnvTracesSamplerArg, c.arg))
		if err != nil {
			t.Fatalf("%s %s: %v", c.sampler, c.arg, err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(s))
		_, span := tp.Tracer("t").Start(c.parent, "s")
		if got := span.SpanContext().IsSampled(); got != c.want {
			t.Errorf("%q (arg %q) under %v: sampled %v, want %v", c.sampler, c.arg, trace.SpanContextFromContext(c.parent).TraceFlags(), got, c.want)
		}
		span.End()
	}

	// A local parent's decision is followed: its children are its trace.
	s, _ := otlp.Sampler(env(otlp.EnvTracesSampler, "parentbased_traceidratio", otlp.EnvTracesSamplerArg, "1"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(s))
	ctx, parent := tp.Tracer("t").Start(context.Background(), "root")
	_, child := tp.Tracer("t").Start(ctx, "child")
	if !child.SpanContext().IsSampled() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("a local parent's child: sampled %v, trace %s (parent's %s)", child.SpanContext().IsSampled(), child.SpanContext().TraceID(), parent.SpanContext().TraceID())
	}
}

func TestSamplerRefusesWhatItDoesNotKnow(t *testing.T) {
	for _, kv := range [][2]string{{"jaeger_remote", ""}, {"parentbased_traceidratio", "1.5"}, {"traceidratio", "half"}} {
		if _, err := otlp.Sampler(env(otlp.EnvTracesSampler, kv[0], otlp.EnvTracesSamplerArg, kv[1])); err == nil {
			t.Errorf("%s=%q %s=%q accepted", otlp.EnvTracesSampler, kv[0], otlp.EnvTracesSamplerArg, kv[1])
		}
	}
}
