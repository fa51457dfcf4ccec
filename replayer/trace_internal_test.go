package replayer

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
)

// A copy never carries the original's traceparent, whatever its key's
// case (nats.Header keeps keys as written), traced or not.
func TestRepublishStripsTraceparentAnyCase(t *testing.T) {
	const orig = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	for name, j := range map[string]*job{"off": {}, "on": {tracer: telemetry.Tracer(tp)}} {
		msg := &nats.Msg{Subject: "intake.in.demo.x", Header: nats.Header{
			envelope.HeaderTraceparent: {orig}, "Traceparent": {orig}, "TRACEPARENT": {orig}, "X-Other": {"1"}}}
		if span := j.startRepublish(msg, store.ReplayItem{}); span != nil {
			span.End()
		}
		for k, v := range msg.Header {
			if strings.EqualFold(k, envelope.HeaderTraceparent) && (k != envelope.HeaderTraceparent || v[0] == orig) {
				t.Errorf("%s: copy keeps %s: %q", name, k, v)
			}
		}
		if _, ok := msg.Header[envelope.HeaderTraceparent]; ok != (name == "on") || msg.Header.Get("X-Other") != "1" {
			t.Errorf("%s: copy headers %v", name, msg.Header)
		}
	}
}
