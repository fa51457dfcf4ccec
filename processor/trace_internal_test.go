package processor

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

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
