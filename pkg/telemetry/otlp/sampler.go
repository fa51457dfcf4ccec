package otlp

import (
	"fmt"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The sampler variables (the OpenTelemetry names), read by New itself.
const (
	EnvTracesSampler    = "OTEL_TRACES_SAMPLER"
	EnvTracesSamplerArg = "OTEL_TRACES_SAMPLER_ARG"
)

// Sampler is the sampler New's provider uses, from OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG as lookup reads them (the names and defaults the
// OpenTelemetry SDKs use: parentbased_always_on when unset, ratio 1.0).
//
// One difference, on purpose: a parent-based sampler follows a LOCAL
// parent's decision, but re-decides a REMOTE parent's with its root sampler.
// A remote parent is what a message's traceparent names, and whoever may
// publish to intake.in.> writes that header: following its sampled flag
// would let any publisher hide its messages from Intake's traces (flags 00)
// or force them into them (01). The root samplers decide on the trace id
// alone (always_on, always_off, traceidratio), so a genuine message, whose
// trace ingress started under the same sampler, gets the decision ingress
// made and its trace stays whole.
func Sampler(lookup func(string) (string, bool)) (sdktrace.Sampler, error) {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	name := strings.ToLower(get(EnvTracesSampler))
	if name == "" {
		name = "parentbased_always_on"
	}
	ratio := 1.0
	if arg := get(EnvTracesSamplerArg); arg != "" && strings.HasSuffix(name, "traceidratio") {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("otlp: %s=%q: want a ratio from 0 to 1", EnvTracesSamplerArg, arg)
		}
		ratio = r
	}
	root, parentBased := map[string]sdktrace.Sampler{
		"always_on": sdktrace.AlwaysSample(), "always_off": sdktrace.NeverSample(), "traceidratio": sdktrace.TraceIDRatioBased(ratio),
	}[strings.TrimPrefix(name, "parentbased_")], strings.HasPrefix(name, "parentbased_")
	if root == nil {
		return nil, fmt.Errorf("otlp: %s=%q: one of always_on, always_off, traceidratio and their parentbased_ forms", EnvTracesSampler, name)
	}
	if !parentBased {
		return root, nil
	}
	return sdktrace.ParentBased(root, sdktrace.WithRemoteParentSampled(root), sdktrace.WithRemoteParentNotSampled(root)), nil
}
