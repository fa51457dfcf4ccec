package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/natsserver"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
)

// TestConsumerWindowsFollowTheConfigInPlace: a processor started with
// another processor.max_ack_pending (or replicas) changes the shared
// consumers' windows without losing their place in the stream.
func TestConsumerWindowsFollowTheConfigInPlace(t *testing.T) {
	js := jsFor(t, embedded(t, natsserver.Config{}).ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Ensure(ctx, js, testStream()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, envelope.SubjectIn("demo", "t"), fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	p := config.Processor{BatchSize: 10, Concurrency: 2, Replicas: 1}.WithDefaults()
	cons, err := EnsureProcessorConsumer(ctx, js, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.MaxAckPending; got != 50 {
		t.Fatalf("window = %d, want 1 replica × 10 × (2×2+1) = 50", got)
	}
	// One message delivered and acked: the consumer's place.
	batch, err := cons.FetchNoWait(1)
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}

	p.Replicas, p.MaxAckPending = 4, 0
	cons, err = EnsureProcessorConsumer(ctx, js, p.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxAckPending != 200 {
		t.Errorf("window after 4 replicas = %d, want 200", info.Config.MaxAckPending)
	}
	if info.AckFloor.Stream != 1 || info.NumPending != 2 {
		t.Errorf("after the update: ack floor %d, %d pending; want 1 and 2 (the place kept)", info.AckFloor.Stream, info.NumPending)
	}

	rc, err := EnsureReceiptsConsumer(ctx, js, config.Processor{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := rc.CachedInfo().Config.MaxAckPending; got != 6000 {
		t.Errorf("receipts window with 3 replicas = %d, want 6,000", got)
	}
	if _, err := EnsureReceiptsConsumer(ctx, js, config.Processor{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	rinfo, err := js.Consumer(ctx, envelope.StreamReceipts, envelope.ConsumerReceipts)
	if err != nil {
		t.Fatal(err)
	}
	if got := rinfo.CachedInfo().Config.MaxAckPending; got != 2000 {
		t.Errorf("receipts window back to 1 replica = %d, want 2,000", got)
	}
}

func TestShardConsumersFilterOnTheirIntegrations(t *testing.T) {
	p := config.Processor{Shard: "eu"}
	tests := []struct {
		name    string
		cc      jetstream.ConsumerConfig
		durable string
		filter  string
		filters []string
	}{
		{"unsharded", ProcessorConsumerConfig(config.Processor{}, "a", "b"), "processor", "intake.in.>", nil},
		{"one integration: pinned in the request subject", ProcessorConsumerConfig(p, "stripe-eu"), "processor-eu", "intake.in.stripe-eu.>", nil},
		{"several, sorted, once each", ProcessorConsumerConfig(p, "shop", "gh", "shop"), "processor-eu", "", []string{"intake.in.gh.>", "intake.in.shop.>"}},
		{"receipts unsharded", ReceiptsConsumerConfig(config.Processor{}, "a"), "receipts", "intake.receipts.>", nil},
		{"receipts of a shard", ReceiptsConsumerConfig(p, "gh", "shop"), "receipts-eu", "", []string{"intake.receipts.gh", "intake.receipts.shop"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cc.Durable != tt.durable || tt.cc.FilterSubject != tt.filter || !slices.Equal(tt.cc.FilterSubjects, tt.filters) {
				t.Errorf("durable %q, filter %q, filters %q; want %q, %q, %q", tt.cc.Durable, tt.cc.FilterSubject, tt.cc.FilterSubjects,
					tt.durable, tt.filter, tt.filters)
			}
		})
	}

	js := jsFor(t, embedded(t, natsserver.Config{}).ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Ensure(ctx, js, testStream()); err != nil {
		t.Fatal(err)
	}
	// A shard without integrations would take every shard's messages.
	if _, err := EnsureProcessorConsumer(ctx, js, p); !errors.Is(err, ErrRefused) {
		t.Fatalf("a shard without integrations: %v, want ErrRefused", err)
	}
	// The filter follows the shard's integrations in place.
	if _, err := EnsureProcessorConsumer(ctx, js, p, "a"); err != nil {
		t.Fatal(err)
	}
	cons, err := EnsureProcessorConsumer(ctx, js, p, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.FilterSubjects; !slices.Equal(got, []string{"intake.in.a.>", "intake.in.b.>"}) {
		t.Errorf("filters after adding b: %q", got)
	}
	if _, err := EnsureReceiptsConsumer(ctx, js, p, "a", "b"); err != nil {
		t.Fatal(err)
	}
}
