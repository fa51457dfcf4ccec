package config

import (
	"strings"
	"testing"
)

func TestMaxAckPendingIsSizedFromTheDeployment(t *testing.T) {
	tests := []struct {
		name string
		in   Processor
		want int
	}{
		{"defaults: 2 replicas × 256 × (2×2+1)", Processor{}, 2560},
		{"four replicas", Processor{Replicas: 4}, 4 * 1280},
		{"small batches", Processor{BatchSize: 10, Concurrency: 2, Replicas: 4}, 200},
		{"one replica, one batch at a time", Processor{BatchSize: 100, Concurrency: 1, Replicas: 1}, 300},
		{"set: kept", Processor{MaxAckPending: 10000, Replicas: 4}, 10000},
		{"set to exactly one processor's batches", Processor{MaxAckPending: 512}, 512},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.in.WithDefaults()
			if p.MaxAckPending != tt.want {
				t.Errorf("max_ack_pending = %d, want %d", p.MaxAckPending, tt.want)
			}
			if err := p.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestReceiptsWindowFollowsReplicas(t *testing.T) {
	if got := (Processor{}).WithDefaults().ReceiptsMaxAckPending(); got != 4000 {
		t.Errorf("receipts window = %d, want 2 × 2,000", got)
	}
	if got := (Processor{Replicas: 5}).WithDefaults().ReceiptsMaxAckPending(); got != 10000 {
		t.Errorf("receipts window with 5 replicas = %d, want 10,000", got)
	}
}

// TestAWindowBelowOneProcessorsBatchesIsAnError: the start fails naming
// the keys, rather than a processor that waits for a window that never
// fits its batches.
func TestAWindowBelowOneProcessorsBatchesIsAnError(t *testing.T) {
	_, err := Parse([]byte("processor: {batch_size: 100, concurrency: 4, max_ack_pending: 399}\n"), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("a window of 399 under batches of 100 × 4 was accepted")
	}
	for _, want := range []string{"processor.max_ack_pending", "processor.batch_size × processor.concurrency", "(100 × 4 = 400)", "got 399"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := Parse([]byte("processor: {replicas: 0, max_ack_pending: -1}\n"), func(string) (string, bool) { return "", false }); err == nil ||
		!strings.Contains(err.Error(), "processor.max_ack_pending") {
		t.Errorf("a negative window: %v", err)
	}
	if err := (Processor{Replicas: -1}).WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "processor.replicas") {
		t.Errorf("replicas -1: %v", err)
	}
}

func TestShardNeedsANameAndIntegrations(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	if _, err := Parse([]byte("processor: {shard: eu.west}\nintegrations: [{name: a, provider: standard, tenant: t, secrets: [s]}]\n"), none); err == nil ||
		!strings.Contains(err.Error(), "processor.shard: must be letters, digits") {
		t.Errorf("a shard named eu.west: %v", err)
	}
	if _, err := Parse([]byte("processor: {shard: eu}\n"), none); err == nil || !strings.Contains(err.Error(), "processor.shard: a shard consumes the integrations") {
		t.Errorf("a shard without integrations: %v", err)
	}
	if _, err := Parse([]byte("processor: {shard: eu-1}\nintegrations: [{name: a, provider: standard, tenant: t, secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]}]\n"), none); err != nil {
		t.Errorf("shard eu-1 with one integration: %v", err)
	}
}
