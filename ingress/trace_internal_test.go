package ingress

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/telemetry"
)

// okVerifier verifies every delivery, allocating nothing.
type okVerifier struct{}

func (okVerifier) Verify(*provider.Request) (provider.Identity, error) {
	return provider.Identity{ID: "evt_1"}, nil
}

// tracedPath runs the tracing a webhook request meets: traceVerify itself,
// and the span bookkeeping traceRequest and tracePublish wrap around
// receive and the publish (which, off, they call directly).
func tracedPath(s *Service, r *http.Request, in *integration, d *provider.Request, msg *nats.Msg, key envelope.Key, ack *jetstream.PubAck) {
	q := request{r: r, in: in}
	_, _ = s.traceVerify(&q, in.verifier, d)
	if s.tracer == nil {
		return
	}
	s.startRequest(&q)
	endPublish(s.startPublish(q.r.Context(), msg, key, "invoice.paid"), ack, nil)
	endRequest(q.span, http.StatusOK, "accepted")
}

// With tracing off (no Options.TracerProvider) a request allocates nothing for
// tracing and its message gets no traceparent. An allocation count, never a
// timing.
func TestTracingOffAllocatesNothingPerRequest(t *testing.T) {
	in := &integration{verifier: okVerifier{}}
	in.Name, in.Tenant = "demo", "acme"
	d := &provider.Request{Body: []byte(`{}`)}
	key := envelope.Key{Integration: "demo", Account: "main", EventID: "evt_1"}
	msg := &nats.Msg{Subject: "intake.in.demo.invoice%2Epaid", Header: nats.Header{}}
	ack := &jetstream.PubAck{Sequence: 1}
	r := httptest.NewRequest(http.MethodPost, "/webhooks/demo", nil)

	off := &Service{}
	if n := testing.AllocsPerRun(100, func() { tracedPath(off, r, in, d, msg, key, ack) }); n != 0 {
		t.Errorf("%v allocations per request with tracing off, want 0", n)
	}
	if len(msg.Header) != 0 {
		t.Fatalf("tracing off wrote headers %v", msg.Header)
	}

	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	on := &Service{}
	on.tracer = telemetry.Tracer(tp)
	if n := testing.AllocsPerRun(10, func() { tracedPath(on, r, in, d, msg, key, ack) }); n == 0 {
		t.Error("the traced path allocates nothing: the hooks are not measured")
	}
	if tp := msg.Header.Get(envelope.HeaderTraceparent); len(tp) != 55 {
		t.Errorf("traced message traceparent %q, want one", tp)
	}
	if id := msg.Header.Get(envelope.HeaderMsgID); id != "" {
		t.Errorf("tracing touched Nats-Msg-Id: %q", id)
	}
}

// logArgs, at every log call on a request's path, hands its arguments
// back untouched with tracing off.
func TestLogArgsAllocateNothingWhenOff(t *testing.T) {
	s := &Service{}
	ctx := context.Background()
	args := []any{"integration", "demo", "reason", "bad_signature"}
	if n := testing.AllocsPerRun(100, func() { _ = s.logArgs(ctx, args...) }); n != 0 {
		t.Errorf("%v allocations with tracing off, want 0", n)
	}
	if got := s.logArgs(ctx, args...); len(got) != len(args) {
		t.Errorf("tracing off added %v", got[len(args):])
	}
}
