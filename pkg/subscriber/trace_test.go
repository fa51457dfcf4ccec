package subscriber_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/subscriber"
)

// The handler's ctx carries a span continuing the message's trace; a
// redelivery (after a handler error) runs in a new trace linked to it.
func TestHandlerRunsInTheEventsTrace(t *testing.T) {
	js := testrig.NATS(t, config.Stream{Replicas: 1, MaxAge: time.Hour, DuplicateWindow: time.Minute, MaxBytes: -1}).JS
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	k := envelope.Key{Integration: "demo", Account: "main", EventID: "evt_1"}
	m := nats.NewMsg(envelope.SubjectOut("acme", "demo", "invoice.paid"))
	m.Data = []byte(`{}`)
	m.Header.Set(envelope.HeaderKey, k.String())
	m.Header.Set(envelope.HeaderTenant, "acme")
	m.Header[envelope.HeaderTraceparent] = []string{"00-" + tid + "-" + sid + "-01"}
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	seen := make(chan trace.SpanContext, 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	calls := 0 // the handler's goroutine only
	go func() {
		done <- subscriber.Consume(ctx, js, subscriber.Options{Durable: "traced", Backoff: []time.Duration{50 * time.Millisecond}, TracerProvider: tp},
			func(ctx context.Context, _ subscriber.Message) error {
				seen <- trace.SpanContextFromContext(ctx)
				if calls++; calls == 1 {
					return errors.New("downstream busy")
				}
				return nil
			})
	}()
	var ran []trace.SpanContext
	for range 2 {
		select {
		case sc := <-seen:
			ran = append(ran, sc)
		case <-time.After(10 * time.Second):
			t.Fatalf("handler called %d times, want 2", len(ran))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ran[0].TraceID().String() != tid || !ran[0].IsSampled() {
		t.Errorf("first delivery ran in trace %s, want %s", ran[0].TraceID(), tid)
	}
	if ran[1].TraceID().String() == tid || !ran[1].IsValid() {
		t.Errorf("redelivery ran in trace %s, want a new one", ran[1].TraceID())
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended, want 2", len(spans))
	}
	if p := spans[0].Parent(); p.SpanID().String() != sid || !p.IsRemote() {
		t.Errorf("first span's parent %v, want the remote %s", p, sid)
	}
	if l := spans[1].Links(); spans[1].Parent().IsValid() || len(l) != 1 || l[0].SpanContext.SpanID().String() != sid {
		t.Errorf("redelivery span: parent %v, links %v; want a root linked to %s", spans[1].Parent(), l, sid)
	}
}
