package processor

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
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
