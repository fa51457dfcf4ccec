package telemetry

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/envelope"
)

// instrumentationScopeURL names the tracer of every Intake span.
const instrumentationScopeURL = "github.com/intakehq/intake"

// Tracer is the Intake tracer of tp, nil when tp is nil (tracing off).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(instrumentationScopeURL)
}

// AppendTraceID appends the trace_id attribute of a log line on an event's
// path to args when sc is sampled; otherwise it returns args as they are.
// Callers build args only when the event is traced: an attribute passed to
// slog's ...any is boxed, an allocation per log line even when empty.
func AppendTraceID(args []any, sc trace.SpanContext) []any {
	if !sc.IsSampled() {
		return args
	}
	return append(args, slog.String("trace_id", sc.TraceID().String()))
}

// Attribute keys Intake's spans share (docs/tracing.md). Spans carry no
// payload, header value, secret or raw event id: an event is named by
// KeyHash, which an operator can compute from a scoped key to find its
// spans, and log lines on the event's path carry the trace id beside the
// key itself.
const (
	AttrIntegration  = attribute.Key("intake.integration")
	AttrTenant       = attribute.Key("intake.tenant")
	AttrEventType    = attribute.Key("intake.event_type")
	AttrKeyHash      = attribute.Key("intake.key_hash")
	AttrOutcome      = attribute.Key("intake.outcome")
	AttrStreamSeq    = attribute.Key("intake.stream_seq")
	AttrDelivery     = attribute.Key("intake.delivery")
	AttrReplayID     = attribute.Key("intake.replay_id")
	AttrReplayMode   = attribute.Key("intake.replay_mode")
	AttrExecutionID  = attribute.Key("intake.execution_id")
	AttrMode         = attribute.Key("intake.mode")
	AttrBatchSize    = attribute.Key("intake.batch_size")
	AttrMessageCount = attribute.Key("intake.messages")
)

// KeyHash names an event in span attributes: the first 16 hex characters
// of the SHA-256 of its scoped key (`printf %s "$key" | sha256sum | cut -c1-16`).
func KeyHash(k envelope.Key) string {
	sum := sha256.Sum256([]byte(k.String()))
	return hex.EncodeToString(sum[:8])
}
