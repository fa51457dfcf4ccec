package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
)

// Options configure a Processor.
type Options struct {
	Store  *store.Store
	JS     jetstream.JetStream
	Config config.Processor
	// Handler applies new events. Defaults to Forward().
	Handler Handler
	Metrics *telemetry.Metrics // defaults to a private registry
	Log     *slog.Logger       // defaults to discarding
	// AfterCommit, when set, runs after a transaction commits and before the
	// ack; an error skips the ack. It exists for fault injection ("the
	// processor dies between commit and ack") in tests and the chaos harness.
	AfterCommit func(*Event) error
}

// Processor consumes INTAKE_IN through the shared durable consumer.
type Processor struct {
	o Options
}

// New validates o and fills defaults.
func New(o Options) (*Processor, error) {
	if o.Store == nil || o.JS == nil {
		return nil, errors.New("processor: Options.Store and Options.JS are required")
	}
	if o.Handler == nil {
		o.Handler = Forward()
	}
	if o.Metrics == nil {
		o.Metrics = telemetry.NewMetrics()
	}
	if o.Log == nil {
		o.Log = telemetry.Discard()
	}
	if o.Config.Concurrency < 1 {
		o.Config.Concurrency = 1
	}
	return &Processor{o: o}, nil
}

// Run consumes until ctx is cancelled, then stops fetching, finishes the
// messages already fetched (commit, ack) and returns.
func (p *Processor) Run(ctx context.Context) error {
	for {
		err := p.consume(ctx)
		if ctx.Err() != nil {
			return nil
		}
		// The iterator ended without a shutdown (consumer deleted, NATS
		// restarted with a new stream, …): set up again after a pause.
		p.o.Log.Warn("processor consumer ended; restarting", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func (p *Processor) consume(ctx context.Context) error {
	cons, err := stream.EnsureProcessorConsumer(ctx, p.o.JS, p.o.Config)
	if err != nil {
		return err
	}
	// Prefetch at most two messages per worker: fetched messages wait in the
	// client buffer, and their ack deadline runs while they wait.
	it, err := cons.Messages(jetstream.PullMaxMessages(2 * p.o.Config.Concurrency))
	if err != nil {
		return fmt.Errorf("processor: pull: %w", err)
	}
	stop := context.AfterFunc(ctx, it.Drain)
	defer stop()

	// Work continues after ctx ends: drained messages are still committed
	// and acked. Each transaction is bounded by the ack deadline instead.
	work := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	errc := make(chan error, p.o.Config.Concurrency)
	for range p.o.Config.Concurrency {
		wg.Go(func() {
			for {
				msg, err := it.Next()
				if err != nil {
					errc <- err
					return
				}
				p.handle(work, ctx, msg)
			}
		})
	}
	wg.Wait()
	it.Stop()
	return <-errc
}

// handle runs one message to its end: acked, nak'd for a retry, or terminated.
func (p *Processor) handle(ctx, shutdown context.Context, msg jetstream.Msg) {
	ev, err := decode(msg)
	if err != nil {
		// Not something ingress wrote; retrying cannot help. It stays in
		// INTAKE_IN for inspection.
		p.o.Metrics.Failures.WithLabelValues("", "malformed").Inc()
		p.o.Log.Error("terminating malformed message", "subject", msg.Subject(), "err", err)
		_ = msg.TermWithReason("malformed envelope")
		return
	}
	for attempt := 0; ; attempt++ {
		outcome, err := p.apply(ctx, ev)
		if err == nil {
			p.o.Metrics.Processed.WithLabelValues(ev.Key.Integration, outcome.String()).Inc()
			if outcome == store.Conflict {
				p.o.Metrics.Conflicts.WithLabelValues(ev.Key.Integration).Inc()
				p.o.Log.Warn("conflict: same event id, different payload", "key", ev.Key.String(), "stream_seq", ev.StreamSeq)
			}
			if p.o.AfterCommit != nil {
				if err := p.o.AfterCommit(ev); err != nil {
					return
				}
			}
			if err := msg.Ack(); err != nil {
				// The commit stands; the redelivery will find the row.
				p.o.Log.Warn("ack failed after commit", "key", ev.Key.String(), "err", err)
			}
			return
		}
		var herr *handlerError
		if errors.As(err, &herr) && !isInfra(err) {
			p.handlerFailed(ctx, msg, ev, herr.err)
			return
		}
		// The database is unreachable or the transaction lost a race: this
		// is not the message's fault, so it must not use up its deliveries.
		// Keep it, extend its deadline, retry.
		p.o.Metrics.Failures.WithLabelValues(ev.Key.Integration, "db").Inc()
		p.o.Log.Warn("inbox transaction failed; retrying", "key", ev.Key.String(), "attempt", attempt+1, "err", err)
		if shutdown.Err() != nil {
			_ = msg.Nak() // another processor takes it now
			return
		}
		_ = msg.InProgress()
		select {
		case <-shutdown.Done():
			_ = msg.Nak()
			return
		case <-time.After(infraBackoff(attempt)):
		}
	}
}

type handlerError struct{ err error }

func (e *handlerError) Error() string { return "handler: " + e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

// apply is the one transaction: claim, handle when new, outbox, commit.
func (p *Processor) apply(ctx context.Context, ev *Event) (store.Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Config.AckWait)
	defer cancel()
	start := time.Now()
	defer func() { p.o.Metrics.TxLatency.Observe(time.Since(start).Seconds()) }()

	var outcome store.Outcome
	err := pgx.BeginFunc(ctx, p.o.Store.Pool(), func(tx pgx.Tx) error {
		var err error
		outcome, err = store.ClaimInbox(ctx, tx, store.Claim{
			Key: ev.Key, Tenant: ev.Tenant, EventType: ev.EventType,
			PayloadSHA256: ev.PayloadSHA256, StreamSeq: ev.StreamSeq, ReceivedAt: ev.ReceivedAt,
		})
		if err != nil || outcome != store.New {
			return err
		}
		msgs, err := p.o.Handler.Handle(ctx, tx, ev)
		if err != nil {
			return &handlerError{err: err}
		}
		return store.InsertOutbox(ctx, tx, outboxRows(ev, msgs))
	})
	return outcome, err
}

// handlerFailed decides a handler error's fate: a retry with backoff while
// deliveries remain, else a visible failed row. The raw message stays in
// INTAKE_IN either way, for replay.
func (p *Processor) handlerFailed(ctx context.Context, msg jetstream.Msg, ev *Event, herr error) {
	permanent := errors.Is(herr, ErrPermanent)
	last := ev.Delivery >= uint64(p.o.Config.MaxDeliver)
	if !permanent && !last {
		p.o.Metrics.Failures.WithLabelValues(ev.Key.Integration, "retry").Inc()
		p.o.Log.Warn("handler failed; will retry", "key", ev.Key.String(), "delivery", ev.Delivery, "err", herr)
		_ = msg.NakWithDelay(retryBackoff(ev.Delivery))
		return
	}
	p.o.Metrics.Failures.WithLabelValues(ev.Key.Integration, "failed").Inc()
	p.o.Log.Error("handler failed; recording failure", "key", ev.Key.String(), "delivery", ev.Delivery, "permanent", permanent, "err", herr)
	err := store.RecordFailure(ctx, p.o.Store.Pool(), store.Claim{
		Key: ev.Key, Tenant: ev.Tenant, EventType: ev.EventType,
		PayloadSHA256: ev.PayloadSHA256, StreamSeq: ev.StreamSeq, ReceivedAt: ev.ReceivedAt,
	}, int(ev.Delivery), herr.Error())
	if err != nil {
		// Not recorded: leave the message unacked so it comes back.
		p.o.Log.Error("recording failure failed", "key", ev.Key.String(), "err", err)
		_ = msg.NakWithDelay(5 * time.Second)
		return
	}
	_ = msg.TermWithReason("handler failed")
}

func outboxRows(ev *Event, msgs []Message) []store.OutboxRow {
	rows := make([]store.OutboxRow, len(msgs))
	for i, m := range msgs {
		rows[i] = store.OutboxRow{Key: ev.Key, Subject: m.Subject, Headers: m.Header, Payload: m.Data}
	}
	return rows
}

// retryBackoff is the wait before the next delivery after a handler error:
// 1s, 5s, 30s, 2m, then 10m.
func retryBackoff(delivery uint64) time.Duration {
	steps := []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}
	i := int(delivery) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(steps) {
		i = len(steps) - 1
	}
	return steps[i]
}

// infraBackoff grows from 100ms to 5s while the database is unreachable.
func infraBackoff(attempt int) time.Duration {
	d := 100 * time.Millisecond << min(attempt, 6)
	return min(d, 5*time.Second)
}
