package processor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
)

// Span names of the processor (docs/tracing.md).
const (
	spanBatch         = "intake.processor.batch"
	spanEvent         = "intake.processor.event"
	spanHandle        = "intake.handle"
	spanOutboxPublish = "intake.outbox.publish"
)

// maxBatchLinks caps the batch span's links to its events' contexts, below
// the SDK's default link limit (128) so a cap is ours and counted:
// intake.batch.events says how many events the batch carried,
// intake.batch.links_dropped how many of their contexts got no link.
const maxBatchLinks = 100

// Attribute keys of the batch span's link count and of a failure's class.
const (
	attrBatchEvents       = attribute.Key("intake.batch.events")
	attrBatchLinksDropped = attribute.Key("intake.batch.links_dropped")
	attrFailure           = attribute.Key("intake.failure")
	attrErrorType         = attribute.Key("error.type")
)

// batchTrace is a fetched batch's spans: one for the batch (a root, linked
// to its events' contexts, up to maxBatchLinks: a batch serves many traces) and one per event,
// which continues the trace the message's traceparent names: ingress's
// publish span, or for a replay copy the replayer's republish span (itself
// linked to the original's trace; the replayer never forwards the
// original's traceparent). A redelivery (JetStream delivery after the
// first) starts a trace of its own instead, linked to the one it retries:
// another attempt, not the first one's continuation. nil when tracing is
// off.
type batchTrace struct {
	span trace.Span
}

// startBatch starts the batch's span and every item's; nil when tracing is
// off.
func (p *Processor) startBatch(items []*item) *batchTrace {
	if p.tracer == nil || len(items) == 0 {
		return nil
	}
	remotes := make([]trace.SpanContext, len(items))
	links := make([]trace.Link, 0, min(len(items), maxBatchLinks))
	dropped := 0
	for i, it := range items {
		remotes[i] = telemetry.ExtractNATS(it.ev.Header)
		switch {
		case !remotes[i].IsValid():
		case len(links) < maxBatchLinks:
			links = append(links, trace.Link{SpanContext: remotes[i]})
		default:
			dropped++
		}
	}
	_, bspan := p.tracer.Start(context.Background(), spanBatch, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...), trace.WithAttributes(telemetry.AttrMessageCount.Int(len(items)),
			attrBatchEvents.Int(len(items)), attrBatchLinksDropped.Int(dropped)))
	for i, it := range items {
		ev := it.ev
		parent := context.Background()
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			telemetry.AttrIntegration.String(ev.Key.Integration),
			telemetry.AttrTenant.String(ev.Tenant),
			telemetry.AttrEventType.String(ev.EventType),
			telemetry.AttrKeyHash.String(telemetry.KeyHash(ev.Key)),
			telemetry.AttrStreamSeq.Int64(int64(ev.StreamSeq)),
			telemetry.AttrDelivery.Int64(int64(ev.Delivery)),
		)}
		// The replay headers come from whoever may publish to intake.in.>,
		// unscreened yet: only a replay id of the replayer's form (a UUID,
		// bounded) becomes an attribute.
		if validReplayID(ev.ReplayID) {
			opts = append(opts, trace.WithAttributes(telemetry.AttrReplayID.String(ev.ReplayID),
				telemetry.AttrReplayMode.String(string(ev.ReplayMode))))
		}
		switch r := remotes[i]; {
		case !r.IsValid():
		case ev.Delivery > 1:
			opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: r,
				Attributes: []attribute.KeyValue{attribute.String("intake.link", "original")}}))
		default:
			parent = trace.ContextWithRemoteSpanContext(parent, r)
		}
		_, it.span = p.tracer.Start(parent, spanEvent, opts...)
		it.span.AddLink(trace.Link{SpanContext: bspan.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("intake.link", "batch")}})
	}
	return &batchTrace{span: bspan}
}

// end ends every item's span and the batch's.
func (bt *batchTrace) end(items []*item) {
	if bt == nil {
		return
	}
	for _, it := range items {
		if it.span != nil {
			it.span.End()
		}
	}
	bt.span.End()
}

// handlerCtx is the context a handler runs in: the event's span's, so the
// handler's own spans are its children.
func (it *item) handlerCtx(ctx context.Context) context.Context {
	if it.span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, it.span)
}

// decided records what the inbox decided for the event.
func (it *item) decided(o inbox.Outcome) {
	if it.span != nil {
		it.span.AddEvent("inbox.decision", trace.WithAttributes(telemetry.AttrOutcome.String(o.String())))
	}
}

// validReplayID reports whether id has the replayer's form: a UUID in its
// 36-character text form, which bounds what an envelope's Intake-Replay-Id
// may put in a span or a log line.
func validReplayID(id string) bool {
	return len(id) == 36 && uuid.Validate(id) == nil
}

// settled records the event's end on its span: committed with outcome o
// (and acked), rejected by the envelope checks, or failed.
func (it *item) settled(outcome string, failed bool) {
	if it.span == nil {
		return
	}
	it.span.SetAttributes(telemetry.AttrOutcome.String(outcome))
	if failed {
		it.span.SetStatus(codes.Error, outcome)
	}
}

// injectOutbox writes the event's span context into an outbox row's
// headers, so the publish (the processor's, the relay's, a redelivery's)
// continues the event's trace. A traceparent the handler set is dropped
// first, traced or not: the row names the event's span or none (a
// handler's header would graft the publish onto a trace of its choosing).
func (it *item) injectOutbox(h map[string][]string) {
	for k := range h {
		if strings.EqualFold(k, envelope.HeaderTraceparent) {
			delete(h, k)
		}
	}
	if it.span != nil {
		telemetry.InjectNATS(it.span.SpanContext(), h)
	}
}

// logArgs is args for a log line about the event, with its trace_id when
// the event is traced. Off, args comes back as is: no attribute is boxed,
// so a log call costs what it did before tracing.
func (it *item) logArgs(args ...any) []any {
	if it.span == nil {
		return args
	}
	return telemetry.AppendTraceID(args, it.span.SpanContext())
}

// startOutboxPublish starts the publish span of an outbox row whose headers
// name the event's span (written by injectOutbox) and points the row's
// traceparent at it; nil when tracing is off or the row carries no trace.
func startOutboxPublish(tracer trace.Tracer, row *store.OutboxRow) trace.Span {
	if tracer == nil {
		return nil
	}
	parent := telemetry.ExtractNATS(row.Headers)
	if !parent.IsValid() {
		return nil
	}
	_, span := tracer.Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), spanOutboxPublish,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.destination.name", row.Subject),
			telemetry.AttrKeyHash.String(telemetry.KeyHash(row.Key)),
		))
	telemetry.InjectNATS(span.SpanContext(), row.Headers)
	return span
}

// handlerTracing wraps each handler run in a span (intake.handle), a child
// of the event's. nil tracer: no middleware at all.
func handlerTracing(tracer trace.Tracer) Middleware {
	return func(next Handler) Handler {
		if tracer == nil {
			return next
		}
		return HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *Event) ([]Message, error) {
			// Attributes at the start, where samplers see them.
			ctx, span := tracer.Start(ctx, spanHandle, trace.WithAttributes(
				telemetry.AttrKeyHash.String(telemetry.KeyHash(ev.Key)),
				telemetry.AttrEventType.String(ev.EventType),
				telemetry.AttrMode.String(string(ev.Mode)),
				telemetry.AttrExecutionID.String(ev.ExecutionID),
			))
			defer func() {
				// A panic (Recover, outside, turns it into an error) ends
				// the span failed too, then goes on unwinding.
				if r := recover(); r != nil {
					handleFailed(span, failurePanic, fmt.Sprintf("%T", r))
					span.End()
					panic(r)
				}
				span.End()
			}()
			msgs, err := next.Handle(ctx, tx, ev)
			if err != nil {
				handleFailed(span, failureClass(err), fmt.Sprintf("%T", err))
			}
			return msgs, err
		})
	}
}

// Failure classes of intake.handle (intake.failure): what the error asks
// for; the event span's intake.outcome says what became of it.
const (
	failureRetry       = "retry"
	failureFailed      = "failed"
	failureQuarantined = "quarantined"
	failurePanic       = "panic"
)

// failureClass is the class of a handler error.
func failureClass(err error) string {
	switch {
	case errors.Is(err, ErrQuarantine):
		return failureQuarantined
	case errors.Is(err, ErrPermanent):
		return failureFailed
	default:
		return failureRetry
	}
}

// handleFailed marks a handler span failed with the failure's class and
// the error's Go type, never its text: a handler's error may quote a URL,
// a token or the payload.
func handleFailed(span trace.Span, class, errType string) {
	span.SetAttributes(attrFailure.String(class), attrErrorType.String(errType))
	span.SetStatus(codes.Error, class)
}
