package dispatcher

import (
	"context"
	"time"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/stream"
)

// watch keeps the dispatcher in step with intake.destination_state (an
// operator's pause, read every StateInterval), writes the breakers'
// changes there, and sets the backlog gauges every backlogInterval, until
// ctx ends.
func (d *Dispatcher) watch(ctx context.Context) {
	tick := time.NewTicker(d.o.StateInterval)
	defer tick.Stop()
	var lastBacklog time.Time
	failing := false
	for {
		d.readState(ctx, &failing)
		if time.Since(lastBacklog) >= backlogInterval {
			lastBacklog = time.Now()
			for _, dst := range d.dests {
				d.observeBacklog(ctx, dst)
			}
		}
		select {
		case <-ctx.Done():
			return
		case c := <-d.circuit:
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := d.o.Store.SetCircuit(wctx, c.destination, c.open, d.o.Instance); err != nil && ctx.Err() == nil {
				d.o.Log.Warn("dispatcher: cannot record the circuit breaker's state", "destination", c.destination, "err", err)
			}
			cancel()
		case <-tick.C:
		}
	}
}

// readState applies the operators' pauses; while Postgres does not answer
// the last state read stays.
func (d *Dispatcher) readState(ctx context.Context, failing *bool) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	states, err := d.o.Store.DestinationStates(rctx)
	cancel()
	if err != nil {
		if !*failing && ctx.Err() == nil {
			d.o.Log.Warn("dispatcher: cannot read the destinations' state; keeping the last", "err", err)
		}
		*failing = true
		return
	}
	*failing = false
	for _, dst := range d.dests {
		s := states[dst.cfg.Name]
		if dst.paused.Swap(s.Paused) != s.Paused {
			if s.Paused {
				d.o.Log.Info("destination paused by an operator", "destination", dst.cfg.Name, "by", s.PausedBy, "reason", s.PausedReason)
			} else {
				d.o.Log.Info("destination resumed by an operator", "destination", dst.cfg.Name, "by", s.PausedBy)
			}
		}
		v := 0.0
		if s.Paused {
			v = 1
		}
		d.o.Metrics.Dispatch.Paused.WithLabelValues(dst.cfg.Name).Set(v)
	}
}

// observeBacklog sets a destination's backlog (not yet delivered, or
// waiting out a retry) and the age of its oldest message.
func (d *Dispatcher) observeBacklog(ctx context.Context, dst *destination) {
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := d.o.JS.Stream(ictx, envelope.StreamOut)
	if err != nil {
		return // the gauges keep their last values; fetching reports NATS trouble
	}
	b, err := stream.ConsumerBacklog(ictx, s, dst.cfg.Durable())
	if err != nil {
		return
	}
	m := d.o.Metrics.Dispatch
	m.Backlog.WithLabelValues(dst.cfg.Name).Set(float64(b.Waiting()))
	age := 0.0
	if !b.Oldest.IsZero() {
		age = max(0, time.Since(b.Oldest).Seconds())
	}
	m.OldestAge.WithLabelValues(dst.cfg.Name).Set(age)
}
