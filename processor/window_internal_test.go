package processor

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
)

func TestWindowFull(t *testing.T) {
	tests := []struct {
		name                       string
		window, ackPending, queued int
		want                       bool
	}{
		{"full with a backlog", 20, 20, 5, true},
		{"over (the window was lowered)", 20, 35, 1, true},
		{"full, nothing waiting", 20, 20, 0, false},
		{"room left", 20, 19, 100, false},
		{"no window", 0, 5000, 100, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := &jetstream.ConsumerInfo{Config: jetstream.ConsumerConfig{MaxAckPending: tt.window},
				NumAckPending: tt.ackPending, NumPending: uint64(tt.queued)}
			if got := windowFull(info); got != tt.want {
				t.Errorf("windowFull = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWindowLookOldest: a look reports the consumer's backlog and the age
// of its oldest unacked message, per shard filter (a message of another
// integration before it does not count), and 0 once everything is acked.
func TestWindowLookOldest(t *testing.T) {
	ns := testenv.NATS(t)
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := stream.Ensure(ctx, js, config.Stream{}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	pub := func(integration string) {
		t.Helper()
		if _, err := js.Publish(ctx, envelope.SubjectIn(integration, "test.event"), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	pub("other") // seq 1, before the shard's first message: not the shard's backlog
	pub("a")
	pub("b")
	pub("a")
	cons, err := stream.EnsureProcessorConsumer(ctx, js, config.Processor{Shard: "s1"}, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	m := telemetry.NewMetrics()
	w := &windowWatch{cons: cons, js: js, metrics: m, log: telemetry.Discard()}
	in, err := js.Stream(ctx, envelope.StreamIn)
	if err != nil {
		t.Fatal(err)
	}
	stored := func(seq uint64) time.Time {
		t.Helper()
		msg, err := in.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		return msg.Time
	}
	now := time.Now().Add(time.Second)
	w.look(ctx, now)
	if got := testutil.ToFloat64(m.ConsumerPending); got != 3 {
		t.Errorf("consumer_pending = %v, want 3", got)
	}
	want, other := now.Sub(stored(2)).Seconds(), now.Sub(stored(1)).Seconds()
	if got := testutil.ToFloat64(m.OldestUnprocessedAge); got != want {
		t.Errorf("oldest_unprocessed_age_seconds = %v, want %v (the shard's first message; the other integration's gives %v)", got, want, other)
	}

	batch, err := cons.Fetch(3, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for msg := range batch.Messages() {
		if err := msg.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("fetched %d messages, want 3", n)
	}
	w.look(ctx, time.Now())
	if got := testutil.ToFloat64(m.OldestUnprocessedAge); got != 0 {
		t.Errorf("oldest_unprocessed_age_seconds after every ack = %v, want 0", got)
	}
	if got := testutil.ToFloat64(m.ConsumerPending); got != 0 {
		t.Errorf("consumer_pending after every ack = %v, want 0", got)
	}
}
