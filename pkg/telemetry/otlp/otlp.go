package otlp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The standard OpenTelemetry environment variables tracing reads. The OTLP
// exporter reads the rest of its own (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
// _COMPRESSION, _CERTIFICATE, their _TRACES_ forms), the SDK reads
// OTEL_BSP_*, the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES;
// New reads OTEL_TRACES_SAMPLER(_ARG) itself (Sampler).
const (
	EnvSDKDisabled       = "OTEL_SDK_DISABLED"
	EnvEndpoint          = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint    = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol          = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol    = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvTracesExporter    = "OTEL_TRACES_EXPORTER"
	protocolHTTPProtobuf = "http/protobuf"
	protocolGRPC         = "grpc"
	tracesExporterOTLP   = "otlp"
	tracesExporterNone   = "none"
	serviceNamePrefix    = "intake-"
	attrServiceName      = "service.name"
	attrServiceVersion   = "service.version"
)

// Options configure New.
type Options struct {
	// Role names the service: service.name is "intake-" + Role unless
	// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says
	// otherwise. Required.
	Role string
	// Version is service.version.
	Version string
	// LookupEnv reads the variables that decide whether tracing is on,
	// which exporter runs and the sampler (the ones named above and in
	// Sampler). Defaults to os.LookupEnv.
	// The exporter, the SDK and the resource read the process environment
	// themselves.
	LookupEnv func(string) (string, bool)
	// EndpointURL, when set, is the OTLP/HTTP traces URL
	// (http://host:4318/v1/traces), in place of the environment's: tests.
	EndpointURL string
}

// Tracing is a role's OpenTelemetry tracer provider, exporting spans over
// OTLP in batches (OTLP/HTTP protobuf by default, grpc when
// OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL says so) — or nothing at all: tracing is off
// unless an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and OTEL_SDK_DISABLED is not true.
// Off, Provider is nil and every service skips its span and header work
// entirely: no allocation on the per-event path.
type Tracing struct {
	sdk *sdktrace.TracerProvider
}

// New builds the tracer provider the environment asks for; a nil
// *Tracing is tracing off and its methods are safe to call.
func New(ctx context.Context, o Options) (*Tracing, error) {
	if o.Role == "" {
		return nil, errors.New("otlp: Options.Role is required")
	}
	env := o.LookupEnv
	if env == nil {
		env = os.LookupEnv
	}
	get := func(k string) string { v, _ := env(k); return strings.TrimSpace(v) }
	if strings.EqualFold(get(EnvSDKDisabled), "true") {
		return nil, nil
	}
	switch exp := strings.ToLower(cmp.Or(get(EnvTracesExporter), tracesExporterOTLP)); exp {
	case tracesExporterOTLP:
	case tracesExporterNone:
		return nil, nil
	default:
		return nil, fmt.Errorf("otlp: %s=%q: only %q and %q are supported", EnvTracesExporter, exp, tracesExporterOTLP, tracesExporterNone)
	}
	if o.EndpointURL == "" && get(EnvEndpoint) == "" && get(EnvTracesEndpoint) == "" {
		return nil, nil
	}
	protoVar := EnvTracesProtocol
	proto := get(EnvTracesProtocol)
	if proto == "" {
		protoVar, proto = EnvProtocol, get(EnvProtocol)
	}
	var exp sdktrace.SpanExporter
	var err error
	switch proto = cmp.Or(proto, protocolHTTPProtobuf); {
	case o.EndpointURL != "":
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(o.EndpointURL))
	case proto == protocolHTTPProtobuf:
		exp, err = otlptracehttp.New(ctx)
	case proto == protocolGRPC:
		// OTLP/HTTP's own protobuf types link grpc already: the grpc
		// exporter adds next to nothing.
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("otlp: %s=%q: only %q and %q are supported", protoVar, proto, protocolHTTPProtobuf, protocolGRPC)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp: OTLP trace exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String(attrServiceName, serviceNamePrefix+o.Role)}
	if o.Version != "" {
		attrs = append(attrs, attribute.String(attrServiceVersion, o.Version))
	}
	// The environment's detector comes last: OTEL_SERVICE_NAME wins.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("otlp: trace resource: %w", err)
	}
	sampler, err := Sampler(env)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	// Limits: Intake's attributes are short, so a long value or a flood of
	// them is no span of ours to export whole.
	return &Tracing{sdk: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler), sdktrace.WithRawSpanLimits(SpanLimits()))}, nil
}

// Span limits of New's provider (SpanLimits).
const (
	spanAttributeValueLengthLimit = 256
	spanAttributeCountLimit       = 32
	spanEventCountLimit           = 32
	spanLinkCountLimit            = 128
	spanAttributePerEventLimit    = 8
	spanAttributePerLinkLimit     = 4
)

// SpanLimits are the limits New's provider applies to every span,
// whatever the environment's OTEL_SPAN_* say: an attribute value is cut to
// 256 bytes, a span keeps 32 attributes, 32 events and 128 links. A value
// Intake sets from a message (the envelope's headers) is bounded before it
// gets there; these are the backstop.
func SpanLimits() sdktrace.SpanLimits {
	return sdktrace.SpanLimits{
		AttributeValueLengthLimit:   spanAttributeValueLengthLimit,
		AttributeCountLimit:         spanAttributeCountLimit,
		EventCountLimit:             spanEventCountLimit,
		LinkCountLimit:              spanLinkCountLimit,
		AttributePerEventCountLimit: spanAttributePerEventLimit,
		AttributePerLinkCountLimit:  spanAttributePerLinkLimit,
	}
}

// Provider is the tracer provider to hand to the services, nil when
// tracing is off.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.sdk
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil }

// ForceFlush exports the spans ended so far.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.sdk.ForceFlush(ctx)
}

// Shutdown exports what is buffered and stops the exporter; call it when
// the role exits, after its services stopped.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}
