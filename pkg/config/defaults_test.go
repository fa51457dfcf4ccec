package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestZeroSectionsGetDefaultsAndValidate(t *testing.T) {
	c := Config{}.WithDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("Config{} with defaults: %v", err)
	}
	p := Processor{}.WithDefaults()
	want := Processor{AckWait: 30 * time.Second, MaxDeliver: 10, BatchSize: 256, BatchWait: 20 * time.Millisecond,
		Concurrency: 2, Backoff: []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute},
		MaxAckPending: 2560, Replicas: 2}
	if !equalProcessor(p, want) || !equalProcessor(c.Processor, want) {
		t.Errorf("Processor{}.WithDefaults() = %+v, want %+v", p, want)
	}
	if got := (Outbox{}).WithDefaults(DefaultDuplicateWindow); got != (Outbox{PollInterval: time.Second, RelayAfter: 5 * time.Second,
		BatchSize: 500, Retention: 72 * time.Hour}) {
		t.Errorf("Outbox{}.WithDefaults(10m) = %+v", got)
	}
	// relay_after follows the window it depends on.
	if got := (Outbox{}).WithDefaults(4 * time.Second).RelayAfter; got != 2*time.Second {
		t.Errorf("relay_after under a 4s window = %s, want 2s", got)
	}
	if got := (Config{NATS: NATS{Stream: Stream{DuplicateWindow: 6 * time.Second}}}).WithDefaults().Outbox.RelayAfter; got != 3*time.Second {
		t.Errorf("Config relay_after under a 6s window = %s, want 3s", got)
	}
	if got := (NATS{}).WithDefaults(); got.PublishTimeout != 5*time.Second || got.Stream != (Stream{Replicas: 1,
		MaxAge: 720 * time.Hour, DuplicateWindow: 2 * time.Minute, MaxBytes: -1}) {
		t.Errorf("NATS{}.WithDefaults() = %+v", got)
	}
	if got := (Ingress{}).WithDefaults(); got.Addr != ":8080" || got.ReadHeaderTimeout != 5*time.Second ||
		got.ReadTimeout != 30*time.Second || got.WriteTimeout != 30*time.Second || got.MaxBodyBytes != 1<<20 {
		t.Errorf("Ingress{}.WithDefaults() = %+v", got)
	}
	if got := (Postgres{}).WithDefaults().MaxConns; got != 10 {
		t.Errorf("postgres.max_conns default = %d", got)
	}
}

func equalProcessor(a, b Processor) bool { return reflect.DeepEqual(a, b) }

func TestWithDefaultsLeavesTheOriginal(t *testing.T) {
	orig := Config{Integrations: []Integration{{Name: "a"}}}
	got := orig.WithDefaults()
	if orig.Integrations[0].MaxBodyBytes != 0 || orig.Processor.AckWait != 0 {
		t.Errorf("WithDefaults wrote to its receiver: %+v", orig.Integrations[0])
	}
	if got.Integrations[0].MaxBodyBytes != DefaultMaxBodyBytes {
		t.Errorf("integration max_body_bytes = %d, want ingress.max_body_bytes", got.Integrations[0].MaxBodyBytes)
	}
	custom := Config{Ingress: Ingress{MaxBodyBytes: 4096}, Integrations: []Integration{{Name: "a"}}}.WithDefaults()
	if custom.Integrations[0].MaxBodyBytes != 4096 {
		t.Errorf("integration max_body_bytes = %d, want ingress.max_body_bytes 4096", custom.Integrations[0].MaxBodyBytes)
	}
}

func TestSectionErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"ack wait", Processor{AckWait: time.Millisecond}.WithDefaults().Validate(), "processor.ack_wait: must be at least 1s"},
		{"batch size", Processor{BatchSize: -1}.WithDefaults().Validate(), "processor.batch_size"},
		{"concurrency", Processor{Concurrency: -2}.WithDefaults().Validate(), "processor.concurrency"},
		{"backoff", Processor{Backoff: []time.Duration{time.Second, -1}}.WithDefaults().Validate(), "processor.backoff[1]"},
		{"relay after", Outbox{RelayAfter: 3 * time.Second}.WithDefaults(4 * time.Second).Validate(4 * time.Second), "outbox.relay_after"},
		{"retention", Outbox{Retention: -time.Hour}.WithDefaults(time.Minute).Validate(time.Minute), "outbox.retention"},
		{"poll interval", Outbox{PollInterval: -time.Second}.WithDefaults(time.Minute).Validate(time.Minute), "outbox.poll_interval"},
		{"publish timeout", NATS{PublishTimeout: -time.Second}.WithDefaults().Validate(), "nats.publish_timeout"},
		{"max bytes", Stream{MaxBytes: -5}.WithDefaults().Validate(), "nats.stream.max_bytes"},
		{"read timeout", Ingress{ReadTimeout: -time.Second}.WithDefaults().Validate(), "ingress.read_timeout"},
		{"max conns", Postgres{MaxConns: -1}.WithDefaults().Validate(), "postgres.max_conns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", tt.err, tt.want)
			}
		})
	}
}
