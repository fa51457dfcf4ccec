package processor

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/stream"
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
	// maxAgeFilters bounds the message gets of one look (one per filter
	// subject of a shard's consumer).
	maxAgeFilters = 4
)

// windowWatch reports, every windowCheckEvery, how full the shared
// consumer's in-flight window (processor.max_ack_pending) is: a window
// that is full while messages wait in the stream means processors wait
// for acks, and replicas past it add no throughput.
type windowWatch struct {
	cons    jetstream.Consumer
	js      jetstream.JetStream
	stream  jetstream.Stream // INTAKE_IN, looked up at the first need
	want    int              // this processor's processor.max_ack_pending
	metrics *telemetry.Metrics
	log     *slog.Logger

	lastFull, lastDiffer time.Time // last log lines
	failing              bool      // the last look failed (logged once)
	ageFailing           bool      // the last age read failed (logged once)
}

// watchWindow starts a windowWatch on cons until ctx ends or stop is called.
func (p *Processor) watchWindow(ctx context.Context, cons jetstream.Consumer) (stop func()) {
	w := &windowWatch{cons: cons, js: p.o.JS, want: p.o.Config.MaxAckPending, metrics: p.o.Metrics, log: p.o.Log}
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
	w.metrics.ConsumerPending.Set(float64(info.NumPending))
	w.metrics.ConsumerRedelivered.Set(float64(info.NumRedelivered))
	w.observeOldest(ctx, info, now)
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

// observeOldest sets the age of the oldest message the consumer has not
// had acked: the first message past its ack floor that its filters match
// (one message get per filter, at most maxAgeFilters, every
// windowCheckEvery), 0 when nothing is pending or waiting.
func (w *windowWatch) observeOldest(ctx context.Context, info *jetstream.ConsumerInfo, now time.Time) {
	if info.NumPending == 0 && info.NumAckPending == 0 {
		w.metrics.OldestUnprocessedAge.Set(0)
		return
	}
	oldest, err := w.oldestUnacked(ctx, info)
	if err != nil {
		if !w.ageFailing && ctx.Err() == nil {
			// Needs $JS.API.STREAM.MSG.GET.INTAKE_IN; the gauge keeps its last value.
			w.log.Warn("cannot read the oldest unprocessed message of INTAKE_IN; intake_processor_oldest_unprocessed_age_seconds is stale until it answers", "err", err)
		}
		w.ageFailing = true
		return
	}
	w.ageFailing = false
	if oldest.IsZero() {
		w.metrics.OldestUnprocessedAge.Set(0)
		return
	}
	w.metrics.OldestUnprocessedAge.Set(max(0, now.Sub(oldest).Seconds()))
}

// oldestUnacked is the stored time of the first message past the ack
// floor that the consumer's filters match; zero when there is none.
func (w *windowWatch) oldestUnacked(ctx context.Context, info *jetstream.ConsumerInfo) (time.Time, error) {
	if w.stream == nil {
		s, err := w.js.Stream(ctx, info.Stream)
		if err != nil {
			return time.Time{}, err
		}
		w.stream = s
	}
	return stream.OldestUnacked(ctx, w.stream, info, maxAgeFilters)
}

// windowFull reports whether the consumer delivers nothing more because
// its window is full while messages wait to be delivered.
func windowFull(info *jetstream.ConsumerInfo) bool {
	window := info.Config.MaxAckPending
	return window > 0 && info.NumAckPending >= window && info.NumPending > 0
}
