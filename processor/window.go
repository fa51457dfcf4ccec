package processor

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/telemetry"
)

const (
	// windowCheckEvery is how often a processor reads its consumer's info
	// to see whether the in-flight window is full: one small request per
	// replica every few seconds, never one per batch.
	windowCheckEvery = 5 * time.Second
	// windowLogEvery is the least time between two log lines about the
	// window from one processor.
	windowLogEvery = time.Minute
)

// windowWatch reports, every windowCheckEvery, how full the shared
// consumer's in-flight window (processor.max_ack_pending) is: a window
// that is full while messages wait in the stream means processors wait
// for acks, and replicas past it add no throughput.
type windowWatch struct {
	cons    jetstream.Consumer
	want    int // this processor's processor.max_ack_pending
	metrics *telemetry.Metrics
	log     *slog.Logger

	lastFull, lastDiffer time.Time // last log lines
	failing              bool      // the last look failed (logged once)
}

// watchWindow starts a windowWatch on cons until ctx ends or stop is called.
func (p *Processor) watchWindow(ctx context.Context, cons jetstream.Consumer) (stop func()) {
	w := &windowWatch{cons: cons, want: p.o.Config.MaxAckPending, metrics: p.o.Metrics, log: p.o.Log}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(windowCheckEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				w.look(ctx, now)
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// look reads the consumer's info once and reports what it shows.
func (w *windowWatch) look(ctx context.Context, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, windowCheckEvery)
	defer cancel()
	info, err := w.cons.Info(ctx)
	if err != nil {
		if !w.failing && ctx.Err() == nil {
			// Consuming goes on; only the report is missing (a user without
			// $JS.API.CONSUMER.INFO.INTAKE_IN.processor, or NATS away).
			w.log.Warn("cannot read the processor consumer's info; the window-full report is off until it answers", "err", err)
		}
		w.failing = true
		return
	}
	w.failing = false
	window := info.Config.MaxAckPending
	w.metrics.AckPending.Set(float64(info.NumAckPending))
	w.metrics.MaxAckPending.Set(float64(window))
	if windowFull(info) {
		w.metrics.WindowFull.Inc()
		if now.Sub(w.lastFull) >= windowLogEvery {
			w.lastFull = now
			w.log.Warn("processor consumer's in-flight window is full: processors wait for acks while messages wait in the stream; "+
				"raise processor.max_ack_pending (or processor.replicas) if the database has room",
				"ack_pending", info.NumAckPending, "max_ack_pending", window, "waiting", info.NumPending)
		}
	}
	if window != w.want && now.Sub(w.lastDiffer) >= windowLogEvery {
		w.lastDiffer = now
		w.log.Warn("processor consumer's window differs from this processor's processor.max_ack_pending: the processor started last set it; give every replica the same value",
			"consumer", window, "config", w.want)
	}
}

// windowFull reports whether the consumer delivers nothing more because
// its window is full while messages wait to be delivered.
func windowFull(info *jetstream.ConsumerInfo) bool {
	window := info.Config.MaxAckPending
	return window > 0 && info.NumAckPending >= window && info.NumPending > 0
}
