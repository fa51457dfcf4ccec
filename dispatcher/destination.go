package dispatcher

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
)

// destination delivers one destination's messages.
type destination struct {
	cfg    config.Destination
	client *http.Client
	// transport is client's: deliveries go through it directly.
	transport http.RoundTripper
	url       *url.URL // cfg.URL, parsed once (config.Validate checked it)
	// destinationValue is the Intake-Destination header's value.
	destinationValue []string
	signer           signer
	limiter          *rate.Limiter // nil: no rate limit
	breaker          *breaker
	paused           atomic.Bool // an operator's pause (intake.destination_state)
	cons             jetstream.Consumer
	js               jetstream.JetStream // to create cons again when it is gone
	log              *slog.Logger
	m                *telemetry.DispatcherMetrics
	// latency and delivered are m's series for this destination, looked
	// up once: a label lookup per delivery hashes the labels each time.
	latency   prometheus.Observer
	delivered prometheus.Counter
	writer    *logWriter
	// circuit receives the breaker's changes for intake.destination_state.
	circuit chan<- circuitChange
}

type circuitChange struct {
	destination string
	open        bool
}

// fetchAhead is how many messages a destination with n workers keeps
// fetched beyond those in its workers' hands: three times n, at most
// maxFetchAhead, so that a large max_in_flight does not hold thousands of
// messages (and their bodies) fetched, nor take the consumer's
// MaxAckPending from the retries.
func fetchAhead(n int) int { return min(3*n, maxFetchAhead) }

const maxFetchAhead = 256

// fetchWait bounds one pull: how long a fetch waits for messages before
// the loop looks at the pause and the breaker again.
const fetchWait = time.Second

// run fetches and delivers until ctx ends, then waits for the deliveries
// in flight (each bounded by the destination's timeout) to be handed to
// the log writer.
//
// max_in_flight workers deliver; the fetcher keeps up to three times as
// many more messages fetched ahead of them (fetchAhead; the window holds
// both), pulling in batches of at least a quarter of the window
// while the workers have buffered work, so a backlog costs a pull request
// per several messages, not one each, and the workers do not wait for the
// next pull: with one max_in_flight ahead they waited for messages 0.5 ms
// of every 1.3 ms they worked (BENCHMARKS.md, "Fetching further ahead"). While the
// destination is paused or its breaker open the fetcher pulls nothing
// (with the breaker open, one message to probe with when none is in
// hand); workers holding a message wait, keeping it theirs with
// InProgress.
func (d *destination) run(ctx context.Context) {
	n := d.cfg.MaxInFlight
	queue := make(chan jetstream.Msg, n+fetchAhead(n)) // fetched, waiting for a worker
	window := make(chan struct{}, cap(queue))          // a token per message fetched and not yet handled
	var workers sync.WaitGroup
	for range n {
		workers.Go(func() {
			for msg := range queue {
				d.handle(ctx, msg)
				<-window
			}
		})
	}
	// What waits for a worker is kept ours as the workers keep theirs
	// (await): behind slow deliveries or a pause it may wait longer than
	// the ack wait.
	keeping, stopKeeping := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(keeping)
		t := time.NewTicker(d.keepEvery())
		defer t.Stop()
		for {
			select {
			case <-t.C:
				keep(queue)
			case <-stopKeeping:
				return
			}
		}
	}()
	defer func() {
		close(stopKeeping)
		<-keeping
		close(queue)
		workers.Wait()
	}()
	for attempt := 0; ctx.Err() == nil; {
		open := d.breaker.isOpen()
		if d.paused.Load() || open && len(window) > 0 {
			// Paused, or probing with a message in hand: nothing more.
			_ = backoff.Sleep(ctx, 100*time.Millisecond)
			continue
		}
		k, ok := take(ctx, window, queue, open)
		if !ok {
			return
		}
		batch, err := d.cons.Fetch(k, jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			release(window, k)
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
			queue <- msg // never blocks: the window bounds what is fetched
		}
		release(window, k-got)
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && ctx.Err() == nil && !d.recreate(ctx, err) {
			d.log.Debug("destination: fetch ended", "destination", d.cfg.Name, "err", err)
		}
	}
}

// take reserves room in the window for a fetch and returns how many
// messages to ask for: one when probing, else every free place, waiting
// for a quarter of the window while the workers have buffered messages to
// deliver.
func take(ctx context.Context, window chan struct{}, queue chan jetstream.Msg, probing bool) (int, bool) {
	select {
	case window <- struct{}{}:
	case <-ctx.Done():
		return 0, false
	}
	k := 1
	for !probing && k < cap(window) {
		select {
		case window <- struct{}{}:
			k++
			continue
		default:
		}
		if k >= cap(window)/4 || len(queue) == 0 {
			break
		}
		select {
		case window <- struct{}{}:
			k++
		case <-ctx.Done():
			release(window, k)
			return 0, false
		}
	}
	return k, true
}

var fetchBackoff = backoff.Backoff{Min: 250 * time.Millisecond, Max: 5 * time.Second}

// keepEvery is how often a message held and not yet delivered (waiting
// for a worker, or in a worker's hands while the destination is paused or
// its breaker open) is kept with InProgress: three times per ack wait.
func (d *destination) keepEvery() time.Duration { return (d.cfg.Timeout + ackMargin) / 3 }

// keep tells JetStream that the messages waiting in queue are still
// being worked on, so that waiting longer than the ack wait (behind slow
// deliveries, a rate limit or a pause) does not have them sent again
// behind the copies held here, each then delivered twice. Every message
// in queue, in a worker's hands or in keep's holds a place in the window,
// whose size is queue's: what keep takes out always fits back.
func keep(queue chan jetstream.Msg) {
	for range len(queue) {
		select {
		case msg := <-queue:
			_ = msg.InProgress()
			queue <- msg
		default: // the workers took the rest
			return
		}
	}
}

func release(window chan struct{}, n int) {
	for range n {
		<-window
	}
}

// await waits until msg may be delivered: the destination not paused, its
// breaker closed or this the half-open breaker's probe (probe set). It
// keeps msg with InProgress while it waits. ok false: shutting down, msg
// given back.
func (d *destination) await(ctx context.Context, msg jetstream.Msg) (ok, probe bool) {
	keep := time.Now()
	for {
		wait := 250 * time.Millisecond
		if !d.paused.Load() {
			ok, probe, retry := d.breaker.allow(time.Now())
			if ok {
				return true, probe
			}
			wait = min(retry, wait)
		}
		if backoff.Sleep(ctx, wait) != nil {
			_ = msg.Nak()
			return false, false
		}
		if time.Since(keep) > d.keepEvery() {
			_ = msg.InProgress()
			keep = time.Now()
		}
	}
}

// recreate makes the destination's consumer again when err says it is gone
// (deleted behind the dispatcher's back: by hand, or with its stream), from
// new messages on; it reports whether it did.
func (d *destination) recreate(ctx context.Context, err error) bool {
	gone := errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted)
	if !gone {
		// A pull to a consumer deleted before it was sent finds no one to
		// answer it: ask whether the consumer is there.
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, cerr := d.js.Consumer(cctx, envelope.StreamOut, d.cfg.Durable())
		cancel()
		gone = errors.Is(cerr, jetstream.ErrConsumerNotFound)
	}
	if !gone {
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

// handle delivers one message and hands the attempt to the log writer,
// which acknowledges it. A message of a type the match leaves out is
// acknowledged at once. Shutting down, a message not yet attempted goes
// back to the stream at once.
func (d *destination) handle(ctx context.Context, msg jetstream.Msg) {
	if ctx.Err() != nil {
		// Fetched ahead, not yet attempted: shutdown waits for the
		// attempts in flight only.
		_ = msg.Nak()
		return
	}
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
	ok, probe := d.await(ctx, msg)
	if !ok {
		return
	}
	if d.limiter != nil {
		start := time.Now()
		if d.limiter.Wait(ctx) != nil {
			if probe {
				d.breaker.cancelProbe()
			}
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
	if outcome == store.DispatchDelivered {
		d.delivered.Inc()
	} else {
		d.m.Attempts.WithLabelValues(d.cfg.Name, outcome, out.class).Inc()
	}
	d.latency.Observe(out.latency.Seconds())
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
