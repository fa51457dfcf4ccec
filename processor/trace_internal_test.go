package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
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

// logArgs, at every log call on an event's path, hands its arguments back
// untouched with tracing off: nothing boxed, nothing appended.
func TestLogArgsAllocateNothingWhenOff(t *testing.T) {
	it := testItems("")[0]
	args := []any{"key", "demo/main/evt_1", "delivery", 1}
	if n := testing.AllocsPerRun(100, func() { _ = it.logArgs(args...) }); n != 0 {
		t.Errorf("%v allocations with tracing off, want 0", n)
	}
	if got := it.logArgs(args...); len(got) != len(args) {
		t.Errorf("tracing off added %v", got[len(args):])
	}
}

// recordLog keeps the attributes of every record logged through it.
type recordLog struct{ lines [][]slog.Attr }

func (l *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *recordLog) WithGroup(string) slog.Handler            { return l }
func (l *recordLog) Handle(_ context.Context, r slog.Record) error {
	var attrs []slog.Attr
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	l.lines = append(l.lines, attrs)
	return nil
}

// termMsg is a message whose Term succeeds.
type termMsg struct{ jetstream.Msg }

func (termMsg) TermWithReason(string) error { return nil }

// A rejection's log line carries exactly its own attributes with tracing
// off (an always-passed trace attribute is an allocation per line), and a
// replay id only in the replayer's form: a publisher's 7 MB
// Intake-Replay-Id is logged as its length.
func TestRejectedLogLine(t *testing.T) {
	const uuid = "464c2616-1875-4dc3-9f97-a4f83be388ca"
	for _, tt := range []struct {
		replayID string
		want     []string
		value    string
	}{
		{"", []string{"reason", "detail", "key", "tenant", "subject", "stream_seq", "replay_id", "replay_mode"}, ""},
		{uuid, []string{"reason", "detail", "key", "tenant", "subject", "stream_seq", "replay_id", "replay_mode"}, uuid},
		{strings.Repeat("x", 7<<20), []string{"reason", "detail", "key", "tenant", "subject", "stream_seq", "replay_id_len", "replay_mode"}, "7340032"},
	} {
		rec := &recordLog{}
		p := &Processor{o: Options{Log: slog.New(rec), Metrics: telemetry.NewMetrics()}}
		it := testItems("")[0]
		it.msg = termMsg{}
		it.ev.ReplayID = tt.replayID
		it.reject = &store.Rejection{Reason: "bad_key", Subject: "intake.in.demo.x"}
		p.rejected(it)
		if len(rec.lines) != 1 {
			t.Fatalf("replay id of %d bytes: %d log lines, want 1", len(tt.replayID), len(rec.lines))
		}
		var keys []string
		for _, a := range rec.lines[0] {
			keys = append(keys, a.Key)
			if a.Key == tt.want[6] && a.Value.String() != tt.value {
				t.Errorf("replay id of %d bytes: %s = %.40q, want %q", len(tt.replayID), a.Key, a.Value.String(), tt.value)
			}
		}
		if !slices.Equal(keys, tt.want) {
			t.Errorf("replay id of %d bytes: keys %q, want %q", len(tt.replayID), keys, tt.want)
		}
	}
}

// A replay id becomes a span attribute only in the replayer's form: the
// header is the publisher's word, read before the envelope checks.
func TestReplayIDAttributeBounded(t *testing.T) {
	const uuid = "464c2616-1875-4dc3-9f97-a4f83be388ca"
	for _, id := range []string{uuid, strings.Repeat("x", 7<<20), uuid + "x"} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		p := &Processor{tracer: telemetry.Tracer(tp)}
		items := testItems("")
		items[0].ev.ReplayID, items[0].ev.ReplayMode = id, "reexecute"
		p.startBatch(items).end(items)
		_ = tp.Shutdown(context.Background())
		var got string
		for _, s := range rec.Ended() {
			for _, a := range s.Attributes() {
				if a.Key == telemetry.AttrReplayID {
					got = a.Value.AsString()
				}
			}
		}
		if want := map[bool]string{true: uuid}[id == uuid]; got != want {
			t.Errorf("replay id of %d bytes: attribute %.40q, want %q", len(id), got, want)
		}
	}
}

// handleSpans runs h through Recover and Tracing, as the processor chains
// them, and returns the ended intake.handle span.
func handleSpans(t *testing.T, h HandlerFunc) sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	if _, err := Chain(h, Recover(), Tracing(tp)).Handle(context.Background(), nil, testItems("")[0].ev); err == nil {
		t.Fatal("the failing handler returned no error")
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != spanHandle {
		t.Fatalf("spans ended: %v, want one %s", spans, spanHandle)
	}
	return spans[0]
}

// A failed handler's span says its class and the error's type, never the
// error's text (it may quote a URL with a token); a panic ends it failed.
func TestHandleSpanFailure(t *testing.T) {
	const secret = "https://hooks.example/x?token=s3cret"
	for _, tt := range []struct {
		name    string
		h       HandlerFunc
		class   string
		errType string
	}{
		{"retry", func(context.Context, pgx.Tx, *Event) ([]Message, error) {
			return nil, fmt.Errorf("post %s: refused", secret)
		},
			failureRetry, "*errors.errorString"},
		{"permanent", func(context.Context, pgx.Tx, *Event) ([]Message, error) {
			return nil, Permanent(errors.New(secret))
		}, failureFailed, "*fmt.wrapErrors"},
		{"quarantine", func(context.Context, pgx.Tx, *Event) ([]Message, error) {
			return nil, Quarantine(errors.New(secret))
		}, failureQuarantined, ""},
		{"panic", func(context.Context, pgx.Tx, *Event) ([]Message, error) { panic(secret) }, failurePanic, "string"},
	} {
		span := handleSpans(t, tt.h)
		attrs := map[attribute.Key]string{}
		for _, a := range span.Attributes() {
			attrs[a.Key] = a.Value.Emit()
		}
		if span.Status().Code != codes.Error || attrs[attrFailure] != tt.class || attrs[attrErrorType] == "" ||
			tt.errType != "" && attrs[attrErrorType] != tt.errType {
			t.Errorf("%s: status %v, attributes %v; want error, %s=%s, %s=%s", tt.name, span.Status(), attrs, attrFailure, tt.class, attrErrorType, tt.errType)
		}
		all := fmt.Sprint(span.Status(), attrs, span.Events())
		if strings.Contains(all, "s3cret") {
			t.Errorf("%s: the span holds the error text: %s", tt.name, all)
		}
	}
}

// An outbox row names the event's span or none: a traceparent the handler
// set (in any case) is dropped, traced, unsampled or not traced at all.
func TestInjectOutboxDropsHandlerTraceparent(t *testing.T) {
	const handlers = "00-11111111111111111111111111111111-2222222222222222-01"
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	sampled := sdktrace.NewTracerProvider()
	defer func() { _ = unsampled.Shutdown(context.Background()); _ = sampled.Shutdown(context.Background()) }()
	for name, tp := range map[string]*sdktrace.TracerProvider{"off": nil, "unsampled": unsampled, "sampled": sampled} {
		p := &Processor{}
		if tp != nil {
			p.tracer = telemetry.Tracer(tp)
		}
		items := testItems("")
		bt := p.startBatch(items)
		h := map[string][]string{envelope.HeaderTraceparent: {handlers}, "Traceparent": {handlers}, "X-Other": {"1"}}
		items[0].injectOutbox(h)
		bt.end(items)
		for k, v := range h {
			if strings.EqualFold(k, envelope.HeaderTraceparent) && (name != "sampled" || k != envelope.HeaderTraceparent || v[0] == handlers) {
				t.Errorf("%s: outbox headers keep %s: %q", name, k, v)
			}
		}
		if _, ok := h[envelope.HeaderTraceparent]; ok != (name == "sampled") || len(h["X-Other"]) != 1 {
			t.Errorf("%s: outbox headers %v", name, h)
		}
	}
}

// The batch span links to at most maxBatchLinks events and counts the rest.
func TestBatchLinksCapped(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	p := &Processor{tracer: telemetry.Tracer(tp)}
	var items []*item
	for range maxBatchLinks + 50 {
		items = append(items, testItems("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")...)
	}
	p.startBatch(items).end(items)
	for _, s := range rec.Ended() {
		if s.Name() != spanBatch {
			continue
		}
		attrs := map[attribute.Key]int64{}
		for _, a := range s.Attributes() {
			attrs[a.Key] = a.Value.AsInt64()
		}
		if len(s.Links()) != maxBatchLinks || s.DroppedLinks() != 0 || attrs[attrBatchEvents] != maxBatchLinks+50 || attrs[attrBatchLinksDropped] != 50 {
			t.Errorf("batch span: %d links (%d dropped by the SDK), attributes %v", len(s.Links()), s.DroppedLinks(), attrs)
		}
		return
	}
	t.Fatal("no batch span ended")
}
