package dispatcher

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"

	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
)

// destination delivers one destination's messages.
type destination struct {
	cfg     config.Destination
	client  *http.Client
	signer  signer
	limiter *rate.Limiter // nil: no rate limit
	breaker *breaker
	paused  atomic.Bool // an operator's pause (intake.destination_state)
	cons    jetstream.Consumer
	js      jetstream.JetStream // to create cons again when it is gone
	log     *slog.Logger
	m       *telemetry.DispatcherMetrics
	writer  *logWriter
	// circuit receives the breaker's changes for intake.destination_state.
	circuit chan<- circuitChange
}

type circuitChange struct {
	destination string
	open        bool
}

// fetchWait bounds one pull: how long a fetch waits for messages before
// the loop looks at the pause and the breaker again.
const fetchWait = time.Second

// run fetches and delivers until ctx ends, then waits for the deliveries
// in flight (each bounded by the destination's timeout) to be handed to
// the log writer.
func (d *destination) run(ctx context.Context) {
	slots := make(chan struct{}, d.cfg.MaxInFlight)
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for attempt := 0; ctx.Err() == nil; {
		if d.paused.Load() {
			_ = backoff.Sleep(ctx, fetchWait)
			continue
		}
		ok, probe, retry := d.breaker.allow(time.Now())
		if !ok {
			_ = backoff.Sleep(ctx, min(retry, fetchWait))
			continue
		}
		// One slot for the first message (waiting for a delivery to end),
		// then every slot free now.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			if probe {
				d.breaker.cancelProbe()
			}
			return
		}
		n := 1
	more:
		for !probe && n < cap(slots) {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break more
			}
		}
		batch, err := d.cons.Fetch(n, jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			release(slots, n)
			if probe {
				d.breaker.cancelProbe()
			}
			if d.recreate(ctx, err) {
				continue
			}
			if ctx.Err() == nil {
				if attempt == 0 {
					d.log.Warn("destination: cannot fetch from INTAKE_OUT; trying again", "destination", d.cfg.Name, "err", err)
				}
				_ = backoff.Sleep(ctx, fetchBackoff.Next(attempt))
				attempt++
			}
			continue
		}
		attempt = 0
		got := 0
		for msg := range batch.Messages() {
			got++
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				defer func() { <-slots }()
				d.handle(ctx, msg)
			}()
		}
		release(slots, n-got)
		if probe && got == 0 {
			d.breaker.cancelProbe()
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && ctx.Err() == nil && !d.recreate(ctx, err) {
			d.log.Debug("destination: fetch ended", "destination", d.cfg.Name, "err", err)
		}
	}
}

// recreate makes the destination's consumer again when err says it is gone
// (deleted behind the dispatcher's back: by hand, or with its stream), from
// new messages on; it reports whether it did.
func (d *destination) recreate(ctx context.Context, err error) bool {
	if !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrConsumerDeleted) {
		return false
	}
	cons, cerr := d.js.CreateOrUpdateConsumer(ctx, envelope.StreamOut, ConsumerConfig(d.cfg))
	if cerr != nil {
		return false
	}
	d.log.Warn("destination: its consumer was gone; created again (messages published meanwhile are not delivered)",
		"destination", d.cfg.Name, "consumer", d.cfg.Durable())
	d.cons = cons
	return true
}

var fetchBackoff = backoff.Backoff{Min: 250 * time.Millisecond, Max: 5 * time.Second}

func release(slots chan struct{}, n int) {
	for range n {
		<-slots
	}
}

// handle delivers one message and hands the attempt to the log writer,
// which acknowledges it. A message of a type the match leaves out is
// acknowledged at once. Shutting down, a message not yet attempted goes
// back to the stream at once.
func (d *destination) handle(ctx context.Context, msg jetstream.Msg) {
	h := msg.Headers()
	typ := h.Get(envelope.HeaderEventType)
	if !matchType(d.cfg.Match.Types, typ) {
		d.m.Skipped.WithLabelValues(d.cfg.Name).Inc()
		_ = msg.Ack()
		return
	}
	meta, err := msg.Metadata()
	if err != nil {
		_ = msg.TermWithReason("not a JetStream message")
		return
	}
	if d.limiter != nil {
		start := time.Now()
		if d.limiter.Wait(ctx) != nil {
			_ = msg.Nak()
			return
		}
		if time.Since(start) > d.cfg.Timeout {
			_ = msg.InProgress() // a long wait for the rate: keep the message ours
		}
	}
	attempt := int(meta.NumDelivered)
	id := webhookID(h, meta.Sequence.Stream)
	// The attempt runs to its own timeout even when shutdown begins: its
	// answer is what the log and the ack must say.
	out := d.post(context.WithoutCancel(ctx), msg, id, attempt)
	outcome, wait := decide(out.result, attempt, d.cfg)
	now := time.Now()
	// The breaker counts failures a retry may mend; any other answer says
	// the destination is up.
	if changed, open := d.breaker.record(now, out.status != 0 && !retryable(out.result, d.cfg)); changed {
		d.circuitChanged(open)
	}
	d.m.Attempts.WithLabelValues(d.cfg.Name, outcome, out.class).Inc()
	d.m.Latency.WithLabelValues(d.cfg.Name).Observe(out.latency.Seconds())
	row := store.DispatchAttempt{Destination: d.cfg.Name, MsgID: id, Key: h.Get(envelope.HeaderKey),
		Integration: h.Get(envelope.HeaderIntegration), Tenant: h.Get(envelope.HeaderTenant), EventType: typ,
		StreamSeq: meta.Sequence.Stream, Attempt: attempt, Outcome: outcome, StatusCode: out.status,
		ErrorClass: out.class, Latency: out.latency, Response: out.response, AttemptedAt: now}
	if outcome == store.DispatchRetry {
		next := now.Add(wait)
		row.NextAttemptAt = &next
	}
	if outcome == store.DispatchFailed {
		d.log.Warn("delivery failed", "destination", d.cfg.Name, "key", row.Key, "webhook_id", id,
			"attempt", attempt, "status", out.status, "class", out.class)
	}
	d.writer.in <- entry{row: row, msg: msg, wait: wait}
}

// circuitChanged notes the breaker's change: the gauge, a log line, and
// the state row (written by the dispatcher's state loop).
func (d *destination) circuitChanged(open bool) {
	v := 0.0
	if open {
		v = 1
		d.log.Warn("destination failing: circuit breaker open, probing", "destination", d.cfg.Name,
			"failures_in_a_row", d.cfg.Breaker.Failures, "probe", d.cfg.Breaker.Probe)
	} else {
		d.log.Info("destination answering again: circuit breaker closed", "destination", d.cfg.Name)
	}
	d.m.CircuitOpen.WithLabelValues(d.cfg.Name).Set(v)
	select {
	case d.circuit <- circuitChange{destination: d.cfg.Name, open: open}:
	default: // the state loop is behind; the next change or its look catches up
	}
}

// matchType reports whether an event type is one of patterns (path.Match);
// no patterns match every type.
func matchType(patterns []string, typ string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, typ); ok {
			return true
		}
	}
	return false
}
