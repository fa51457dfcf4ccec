package processor

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
)

// tracedPath runs the tracing hooks a batch's event meets on its way —
// batch and event spans, the inbox decision, the handler's context and
// middleware, the outbox row's header, its publish span, the outcome — as
// handleBatch, apply, committed and sendRows call them.
func tracedPath(p *Processor, items []*item, h Handler, row *store.OutboxRow) {
	bt := p.startBatch(items)
	ctx := context.Background()
	for _, it := range items {
		it.decided(inbox.New)
		_, _ = h.Handle(it.handlerCtx(ctx), nil, it.ev)
		it.injectOutbox(row.Headers)
		if span := startOutboxPublish(p.tracer, row); span != nil {
			span.End()
		}
		it.settled(inbox.New.String(), false)
	}
	bt.end(items)
}

func testItems(traceparent string) []*item {
	h := nats.Header{envelope.HeaderKey: {"demo/main/evt_1"}}
	if traceparent != "" {
		h[envelope.HeaderTraceparent] = []string{traceparent}
	}
	ev := &Event{Key: envelope.Key{Integration: "demo", Account: "main", EventID: "evt_1"}, Tenant: "acme",
		EventType: "invoice.paid", StreamSeq: 1, Delivery: 1, Header: h}
	return []*item{{ev: ev}}
}

// With tracing off (no TracerProvider) the per-event path allocates
// nothing for tracing: no span, no context, no header — also when the
// message carries a traceparent. An allocation count, never a timing.
func TestTracingOffAllocatesNothingPerEvent(t *testing.T) {
	p := &Processor{}
	base := HandlerFunc(func(context.Context, pgx.Tx, *Event) ([]Message, error) { return nil, nil })
	h := Tracing(nil)(base)
	row := &store.OutboxRow{Key: envelope.Key{Integration: "demo", Account: "main", EventID: "evt_1"}, Headers: map[string][]string{}}
	for _, tp := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		items := testItems(tp)
		if n := testing.AllocsPerRun(100, func() { tracedPath(p, items, h, row) }); n != 0 {
			t.Errorf("traceparent %q: %v allocations per event with tracing off, want 0", tp, n)
		}
	}
	if len(row.Headers) != 0 {
		t.Fatalf("tracing off wrote outbox headers %v", row.Headers)
	}

	// The same path traced does allocate, and writes the header: the count
	// above measures the hooks.
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	on := &Processor{tracer: telemetry.Tracer(tp)}
	items := testItems("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if n := testing.AllocsPerRun(10, func() { tracedPath(on, items, Tracing(tp)(base), row) }); n == 0 {
		t.Error("the traced path allocates nothing: the hooks are not measured")
	}
	if got := row.Headers[envelope.HeaderTraceparent]; len(got) != 1 || got[0][3:35] != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("traced outbox row traceparent %q, want the event's trace", got)
	}
}

// The first delivery continues the trace of the message's traceparent; a
// redelivery starts its own, linked to it; the batch span links to both.
func TestEventSpansParentOrLink(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	p := &Processor{tracer: telemetry.Tracer(tp)}
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	first, again := testItems("00-" + tid + "-" + sid + "-01")[0], testItems("00-" + tid + "-" + sid + "-01")[0]
	again.ev.Delivery = 2
	items := []*item{first, again}
	p.startBatch(items).end(items)

	var batch sdktrace.ReadOnlySpan
	var events []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case spanBatch:
			batch = s
		case spanEvent:
			events = append(events, s)
		}
	}
	if batch == nil || len(events) != 2 {
		t.Fatalf("spans ended: batch %v, %d events", batch, len(events))
	}
	if batch.Parent().IsValid() || len(batch.Links()) != 2 || batch.Links()[0].SpanContext.TraceID().String() != tid {
		t.Errorf("batch span: parent %v, links %v; want a root linked to both messages", batch.Parent(), batch.Links())
	}
	for _, ev := range events {
		delivery := int64(0)
		for _, a := range ev.Attributes() {
			if a.Key == telemetry.AttrDelivery {
				delivery = a.Value.AsInt64()
			}
		}
		linked := false
		for _, l := range ev.Links() {
			linked = linked || l.SpanContext.TraceID().String() == tid && l.SpanContext.SpanID().String() == sid
		}
		switch delivery {
		case 1:
			if ev.Parent().TraceID().String() != tid || ev.Parent().SpanID().String() != sid || !ev.Parent().IsRemote() {
				t.Errorf("first delivery: parent %v, want the remote %s/%s", ev.Parent(), tid, sid)
			}
		case 2:
			if ev.Parent().IsValid() || ev.SpanContext().TraceID().String() == tid || !linked {
				t.Errorf("redelivery: parent %v, trace %s, links %v; want a new root linked to the original", ev.Parent(), ev.SpanContext().TraceID(), ev.Links())
			}
		default:
			t.Errorf("event span with delivery %d", delivery)
		}
	}
}
