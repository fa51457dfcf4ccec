package processor

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
