package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
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
// waiting out a retry) and the age of its oldest message: the first
// message past the consumer's ack floor that its filters match.
func (d *Dispatcher) observeBacklog(ctx context.Context, dst *destination) {
	if dst.cons == nil {
		return
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := dst.cons.Info(ictx)
	if err != nil {
		return // the gauges keep their last values; fetching reports NATS trouble
	}
	m := d.o.Metrics.Dispatch
	m.Backlog.WithLabelValues(dst.cfg.Name).Set(float64(info.NumPending) + float64(info.NumAckPending))
	if info.NumPending == 0 && info.NumAckPending == 0 {
		m.OldestAge.WithLabelValues(dst.cfg.Name).Set(0)
		return
	}
	s, err := d.o.JS.Stream(ictx, envelope.StreamOut)
	if err != nil {
		return
	}
	filters := info.Config.FilterSubjects
	if info.Config.FilterSubject != "" {
		filters = append(filters, info.Config.FilterSubject)
	}
	if len(filters) == 0 || len(filters) > 8 {
		filters = []string{envelope.SubjectOutAll}
	}
	var oldest time.Time
	for _, f := range filters {
		msg, err := s.GetMsg(ictx, info.AckFloor.Stream+1, jetstream.WithGetMsgSubject(f))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return
		}
		if oldest.IsZero() || msg.Time.Before(oldest) {
			oldest = msg.Time
		}
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(0, time.Since(oldest).Seconds())
	}
	m.OldestAge.WithLabelValues(dst.cfg.Name).Set(age)
}
