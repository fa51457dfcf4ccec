package processor

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
)

// unanswered is a publish whose PubAck never comes (NATS went away).
type unanswered struct{}

func (unanswered) Ok() <-chan *jetstream.PubAck { return nil }
func (unanswered) Err() <-chan error            { return nil }
func (unanswered) Msg() *nats.Msg               { return nil }

// The acker's close is bounded by one grace period however many batches
// still wait for PubAcks; each used to wait pubAckTimeout on its own, so a
// shutdown while NATS was away took minutes.
func TestAckerCloseIsBounded(t *testing.T) {
	a := newAcker(nil, telemetry.NewMetrics(), telemetry.Discard())
	a.grace = 100 * time.Millisecond
	for i := range ackerQueue {
		a.add(&sent{rows: []store.OutboxRow{{ID: string(rune('a' + i))}}, futures: []jetstream.PubAckFuture{unanswered{}}})
	}
	closed := make(chan struct{})
	go func() { a.close(); close(closed) }()
	// Far less than even one pubAckTimeout, and ackerQueue of them before.
	select {
	case <-closed:
	case <-time.After(pubAckTimeout / 2):
		t.Fatalf("close still waiting after %s with %d batches unanswered", pubAckTimeout/2, ackerQueue)
	}
}

// answered is a publish whose PubAck has already arrived.
type answered struct{ ok chan *jetstream.PubAck }

func newAnswered() answered {
	a := answered{ok: make(chan *jetstream.PubAck, 1)}
	a.ok <- &jetstream.PubAck{Stream: "INTAKE_OUT", Sequence: 1}
	return a
}

func (a answered) Ok() <-chan *jetstream.PubAck { return a.ok }
func (answered) Err() <-chan error              { return nil }
func (answered) Msg() *nats.Msg                 { return nil }

// wait's deadline holds for every future, not just the first (it used to
// be a time.After read once: the next unanswered future waited forever),
// and a PubAck that arrived in time counts after the deadline.
func TestWaitDeadlineHoldsForEveryFuture(t *testing.T) {
	s := &sent{
		rows:    []store.OutboxRow{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}},
		futures: []jetstream.PubAckFuture{unanswered{}, newAnswered(), unanswered{}, newAnswered()},
	}
	done := make(chan published, 1)
	go func() { done <- s.wait(context.Background(), 50*time.Millisecond) }()
	var res published
	select {
	case res = <-done:
	case <-time.After(pubAckTimeout / 2):
		t.Fatal("wait still waiting long after its deadline")
	}
	if strings.Join(res.ok, ",") != "b,d" || strings.Join(res.failed, ",") != "a,c" {
		t.Fatalf("ok %v, failed %v; want b,d acknowledged and a,c failed", res.ok, res.failed)
	}
}

// TestMarkerCountsWhatItLeavesToTheRelay: ids the marker has no room for
// stay pending (the relay publishes them again) and are counted, not
// dropped silently.
func TestMarkerCountsWhatItLeavesToTheRelay(t *testing.T) {
	skipped := prometheus.NewCounter(prometheus.CounterOpts{Name: "skipped"})
	m := &marker{skipped: skipped, log: slog.New(slog.DiscardHandler), in: make(chan []string, 1)}
	m.add([]string{"a"})      // queued
	m.add([]string{"b", "c"}) // no room: left to the relay
	m.add(nil)                // nothing to queue
	if got := testutil.ToFloat64(skipped); got != 2 {
		t.Fatalf("skipped = %v, want the 2 ids that found no room", got)
	}
	if got := <-m.in; len(got) != 1 || got[0] != "a" {
		t.Fatalf("queued %v, want [a]", got)
	}
}
