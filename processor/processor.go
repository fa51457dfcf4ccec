package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/internal/faults"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
)

// Options configure a Processor.
type Options struct {
	Store *store.Store        // required
	JS    jetstream.JetStream // required
	// Config is the processor section; unset fields get config's defaults
	// (config.Processor.WithDefaults) and the result is validated.
	Config config.Processor
	// Integrations are the configured integrations (config.Config's): a
	// message is applied only when its key names one of them, its
	// Intake-Tenant is that integration's tenant and its subject is under
	// intake.in.{integration}. With none, every message is refused
	// (recorded in intake.rejected_messages, terminated).
	Integrations []config.Integration
	// Envelope holds the keys ingress signs envelopes with: when set, a
	// message whose Intake-Envelope-Signature does not verify is refused
	// (bad_envelope_signature), one without is refused (unsigned_envelope)
	// unless Envelope.Require is false, and every body must hash to its
	// Intake-Payload-Sha256. None: envelopes are not checked for a
	// signature.
	Envelope config.Envelope
	// Handler applies events (new ones, retries and re-executions; see
	// Handler). Defaults to Forward().
	Handler Handler
	// OutboxPayloadCopy writes every outbox row with a copy of its payload.
	// By default an output whose payload is the event's body unchanged (what
	// Forward sends) keeps only the INTAKE_IN sequence that holds it
	// (store.OutboxRow.PayloadSeq), and a relay or redelivery reads it back
	// from there; set this when INTAKE_IN keeps messages for less time than
	// outbox.retention keeps rows (the app does: nats.stream.max_age <
	// outbox.retention).
	OutboxPayloadCopy bool
	Metrics           *telemetry.Metrics // defaults to a private registry
	Log               *slog.Logger       // defaults to discarding
	// TracerProvider traces each batch and event (docs/tracing.md),
	// continuing the trace ingress started. nil (the default) is tracing
	// off: no span, no header, nothing allocated per event.
	TracerProvider trace.TracerProvider
}

// Processor consumes INTAKE_IN through the shared durable consumer, one
// Postgres transaction per batch (group commit), and publishes each batch's
// outbox rows to INTAKE_OUT right after the commit (the Relay publishes what
// it could not).
type Processor struct {
	o Options
	// integrations are what each event needs of Options.Integrations, by
	// name, worked out once.
	integrations map[string]*integration
	// verifier checks Intake-Envelope-Signature (nil, no keys: not
	// checked); requireSigned refuses a message without one.
	verifier      *envelope.Verifier
	requireSigned bool
	// faults are the harnesses' hooks (internal/faults), read from Run's
	// context; none in production.
	faults faults.Hooks
	// outage counts the workers waiting out the database; the collector
	// stops pulling while there is any.
	outage *outage
	tracer trace.Tracer // nil: tracing off
	// ready takes the batches' part of Run's health report (readiness.go).
	ready *readiness
}

// New fills o's defaults, then validates it: a bad value is an error naming
// its field, never silently replaced.
func New(o Options) (*Processor, error) {
	if o.Store == nil || o.JS == nil {
		return nil, errors.New("processor: Options.Store and Options.JS are required")
	}
	o.Config = o.Config.WithDefaults()
	if err := o.Config.Validate(); err != nil {
		return nil, fmt.Errorf("processor: %w", err)
	}
	if o.Config.Shard != "" && len(o.Integrations) == 0 {
		return nil, fmt.Errorf("processor: %w", errShardWithoutIntegrations)
	}
	o.Envelope = o.Envelope.WithDefaults()
	if err := o.Envelope.Validate(); err != nil {
		return nil, fmt.Errorf("processor: %w", err)
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
	// Every handler, built-in or a library user's, runs behind recovery,
	// tracing and metrics.
	o.Handler = Chain(o.Handler, Recover(), Tracing(o.TracerProvider), HandlerMetrics(o.Metrics.HandlerLatency))
	byName := make(map[string]*integration, len(o.Integrations))
	for _, in := range o.Integrations {
		byName[in.Name] = &integration{name: in.Name, tenant: in.Tenant, guardsReplays: in.GuardsReplays()}
	}
	initSeries(o.Metrics, o.Integrations)
	return &Processor{o: o, integrations: byName, verifier: envelopeVerifier(o.Envelope.KeyBytes()), requireSigned: o.Envelope.Required(),
		outage: newOutage(o.Config.Concurrency), tracer: telemetry.Tracer(o.TracerProvider)}, nil
}

// integration is what the processor reads of a configured integration for
// each event. A config.Integration is copied whole by a map lookup (close
// to a kilobyte), and GuardsReplays resolves the provider's preset on
// every call: both once per event, until they were worked out here.
type integration struct {
	name, tenant  string
	guardsReplays bool // config.Integration.GuardsReplays
}

// initSeries creates, at 0, the per-integration series the alerts take an
// increase() of: a counter that first appears at 1 has an increase of 0
// over any window, so without them a processor's first conflict or first
// late failure (IntakeConflictsAppearing, IntakeEventFailingRepeatedly),
// the first replayed body (IntakeReplayedBodies) and the first commits
// (IntakeAcceptedNotProcessed) would go unseen.
func initSeries(m *telemetry.Metrics, integrations []config.Integration) {
	for _, in := range integrations {
		m.Conflicts.WithLabelValues(in.Name)
		m.FailureDelivery.WithLabelValues(in.Name)
		m.Processed.WithLabelValues(in.Name, inbox.New.String())
		if in.GuardsReplays() {
			m.ProcessorRejected.WithLabelValues(in.Name, store.RejectReplayedBody)
		}
		m.UnsignedEnvelopes.WithLabelValues(in.Name)
	}
}

// Config is the processor configuration in force, defaults filled.
func (p *Processor) Config() config.Processor { return p.o.Config }

// Run consumes until ctx is cancelled, then stops fetching, finishes the
// batches already fetched (commit, ack, publish) and returns nil once their
// published outbox rows are marked. When its consumer ends (deleted, NATS
// restarted with a new stream, …) Run creates it again, with backoff; it
// returns an error wrapping ErrCannotConsume when it cannot (see
// WithRestartGrace, WithHealth).
func (p *Processor) Run(ctx context.Context, opts ...RunOption) error {
	p.faults = faults.From(ctx)
	mk := newMarker(p.o.Store, p.o.Metrics.OutboxMarkSkipped, p.o.Log)
	defer mk.close()
	pub := newAcker(mk, p.o.Metrics, p.o.Log)
	defer pub.close() // before the marker's: its ids go to the marker
	var watcher sync.WaitGroup
	defer watcher.Wait()
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watcher.Go(func() { store.ServerWatcher{Store: p.o.Store, OnChange: p.serverChanged}.Run(watch) })
	ro := newRunOptions(opts)
	p.ready = &readiness{report: ro.health}
	ro.health = p.ready.setConsumer
	return supervise(ctx, "processor", ro, p.o.Log,
		func(shutdown, setup context.Context, consuming func()) error {
			return p.consume(shutdown, setup, consuming, pub)
		})
}

// serverChanged is the server watcher's callback: another Postgres server
// answers — a failover, a promotion, a restart. Nothing to do here (the
// transactions in flight fail and are retried, the pool reconnects); a
// commit the old primary acknowledged but never replicated is the
// replayer's to re-drive (docs/failover.md). Counted and logged so the
// failover is on record where the events are processed.
func (p *Processor) serverChanged(c store.ServerChange) {
	p.o.Metrics.PostgresServerChanges.Inc()
	p.o.Log.Warn("another Postgres server answers (failover or restart); the replayer re-drives commits it lost",
		"old", c.Old.String(), "new", c.New.String())
}

func (p *Processor) consume(shutdown, setup context.Context, consuming func(), pub *acker) error {
	cons, err := stream.EnsureProcessorConsumer(setup, p.o.JS, p.o.Config, integrationNames(p.o.Integrations)...)
	if err != nil {
		return err
	}
	// Fetched messages wait in the client buffer while their ack deadline
	// runs, so prefetch no more than the batches in flight can take.
	open := func() (jetstream.MessagesContext, error) {
		it, err := cons.Messages(jetstream.PullMaxMessages(p.o.Config.BatchSize * p.o.Config.Concurrency))
		if err != nil {
			return nil, fmt.Errorf("processor: pull: %w", err)
		}
		return it, nil
	}
	it, err := open()
	if err != nil {
		return err
	}
	consuming()
	defer p.watchWindow(shutdown, cons)()
	defer p.watchCoverage(shutdown)()

	batches := make(chan batch)
	// Work continues after shutdown: drained messages are still committed
	// and acked. Each transaction is bounded by the ack deadline instead.
	work := context.WithoutCancel(shutdown)
	var wg sync.WaitGroup
	for range p.o.Config.Concurrency {
		wg.Go(func() {
			for b := range batches {
				p.handleBatch(work, shutdown, b.msgs, pub)
				b.settled()
			}
		})
	}
	c := &collector{ctx: shutdown, open: open, size: p.o.Config.BatchSize, wait: p.o.Config.BatchWait,
		out: batches, outage: p.outage, inProgress: p.keepInProgress}
	err = c.run(it)
	close(batches)
	wg.Wait()
	return err
}

// item is one message of a batch and what became of it.
type item struct {
	msg jetstream.Msg
	ev  *Event
	// reject is set, by the batch's transaction, when the envelope
	// checks refused the message.
	reject *store.Rejection
	// admitted is set by screen for a verified copy of a replay an
	// operator asked to admit replayed bodies: the replay guard passes it.
	admitted bool
	// unsigned is set by screen for a message without a signature that
	// envelope.require: false let through: counted once committed.
	unsigned bool
	// sig is envelopeVerdict's, computed once before the transaction.
	sig struct {
		done           bool
		unsigned       bool
		reason, detail string
	}
	// outcome is what the batch's transaction did with the message
	// (batchTx.decide, runHandlers). executed and settles are notes the
	// transaction takes on the way: a replay copy whose handler already
	// ran, a run that settles a failed row (inbox.Decision).
	outcome  inbox.Outcome
	executed bool
	settles  bool
	// span is the event's (startBatch); nil when tracing is off.
	span trace.Span
}

// handleBatch runs a batch to its end: every message acked, nak'd for a
// retry, or terminated. work carries the batch's database work and outlives
// shutdown, which only ends waiting out a database that is away.
func (p *Processor) handleBatch(work, shutdown context.Context, msgs []jetstream.Msg, pub *acker) {
	items := make([]*item, 0, len(msgs))
	for _, m := range msgs {
		ev, err := decode(m)
		if err != nil {
			p.malformed(shutdown, work, m, err)
			continue
		}
		items = append(items, &item{msg: m, ev: ev})
	}
	defer p.startBatch(items).end(items)
	var (
		committed bool
		ownErr    error // of Intake's own writes, for readiness
	)
	defer func() {
		if p.ready != nil && len(items) > 0 {
			p.ready.batchEnded(committed, ownErr)
		}
	}()
	queue := [][]*item{items}
	for len(queue) > 0 {
		b := queue[0]
		queue = queue[1:]
		if len(b) == 0 {
			continue
		}
		culprit, err := p.commitWithRetry(work, shutdown, b, pub)
		if err != nil && !store.Transient(err) && !errors.As(err, new(*handlerError)) {
			ownErr = err
		}
		switch {
		case err == nil:
			committed = true
		case store.Transient(err) && !errors.As(err, new(*ownFailure)):
			// Shutting down while the database is away (or read-only):
			// leave the messages to another processor. The nak counts a
			// delivery: a shutdown during an outage costs each message of
			// the batch one.
			for _, it := range b {
				_ = it.msg.Nak()
			}
		case len(b) == 1:
			var he *handlerError
			if errors.As(err, &he) {
				err = he.err
			}
			if qe := (*store.QueuedError)(nil); b[0].ev.handler != "" && errors.As(err, &qe) {
				// Alone in its batch, the event queued every statement:
				// its SQL handler's.
				err = fmt.Errorf("handler %s: %w", b[0].ev.handler, err)
			}
			// A queued statement's IK001/IK002 ends the event as a
			// handler's own Permanent or Quarantine would.
			p.handlerFailed(work, shutdown, b[0], classifySQLState(err))
		case culprit >= 0:
			// Isolate the message whose handler failed: the rest commit
			// without it, and it gets a transaction of its own.
			rest := append(append([]*item{}, b[:culprit]...), b[culprit+1:]...)
			queue = append(queue, rest, []*item{b[culprit]})
		default:
			// The batch fails for a reason no single handler owns (say, a
			// value the database refuses): halve it until the poison
			// message stands alone. No savepoints: they overflow past 64.
			half := len(b) / 2
			queue = append(queue, b[:half], b[half:])
		}
	}
}

// commitWithRetry applies b in one transaction, retrying while the database
// is away (store.Transient: unreachable, restarting, read-only after a
// failover, the transaction losing a race) until shutdown: that is not the
// messages' fault and must not use up their deliveries, so they stay
// unacked, their deadlines extended (keepInProgress, from the moment the
// collector formed the batch), and none is nak'd. While it retries, the
// collector stops pulling (outage) and keeps what nats.go had prefetched in
// progress too, so no message of the backlog is redelivered for the outage.
// A shutdown during the outage does nak the batch (handleBatch): another
// processor takes it, at the cost of one delivery.
// Any other error is returned, with the index in b of the message whose
// handler failed, if one did.
//
// A commit whose connection was lost has an unknown outcome; it is retried
// like any other transient failure, never guessed at: the inbox resolves it.
// If it did commit, the retry's claim finds every row the batch inserted and
// Decide answers Redelivered (the row holds this very stream sequence; a
// replay copy: its recorded execution), so the batch is acked and no handler
// runs twice. What the retry writes again is idempotent: a duplicate's
// delivery is keyed by its receipt id, a conflict by its stream sequence, a
// rejection likewise. The outbox rows of the commit that did happen are the
// relay's to publish (after outbox.relay_after).
func (p *Processor) commitWithRetry(work, shutdown context.Context, b []*item, pub *acker) (int, error) {
	for attempt := 0; ; attempt++ {
		outbox, culprit, err := p.apply(work, b)
		if err == nil {
			p.committed(b, outbox, pub)
			return -1, nil
		}
		if !store.Transient(err) {
			return culprit, err
		}
		if p.handlerOwn(work, err) {
			return culprit, &ownFailure{err}
		}
		if attempt == 1 && store.Away(err) {
			// Failed twice, the database away: not a lost race, nor a
			// slow statement. Once every worker waits like this, the
			// collector stops pulling until one is through.
			defer p.outage.wait()()
		}
		p.dbFailed(len(b), attempt, err)
		if backoff.Sleep(shutdown, infraBackoff.Next(attempt)) != nil {
			return -1, err
		}
	}
}

// ownFailure marks a handler error that looks transient but is the
// handler's own (handlerOwn): it takes the handler-failure path.
type ownFailure struct{ err error }

func (e *ownFailure) Error() string { return e.err.Error() }
func (e *ownFailure) Unwrap() error { return e.err }

// handlerOwn reports whether err is the handler's failure that only looks
// transient — a downstream call timing out (a net.Error, a deadline) — not
// its transaction's database: the handler's retry budget (backoff,
// max_deliver) applies to it, not an endless retry in place. An error from
// Postgres itself is the database's; any other network error or deadline
// is the handler's while the database answers a ping.
func (p *Processor) handlerOwn(ctx context.Context, err error) bool {
	var he *handlerError
	if !errors.As(err, &he) {
		return false
	}
	if store.FromPostgres(he.err) {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return p.o.Store.Ping(pctx) == nil
}

// dbFailed counts and logs a transient database failure that is retried.
func (p *Processor) dbFailed(messages, attempt int, err error) {
	p.o.Metrics.Failures.WithLabelValues("", "db", "").Inc()
	msg := "inbox transaction failed; retrying"
	if store.ReadOnly(err) {
		msg = "postgres is read-only (a standby, or failing over); holding the batch and reconnecting"
	}
	p.o.Log.Warn(msg, "messages", messages, "attempt", attempt+1, "err", err)
}

// retryDB runs f until it succeeds, fails for a reason other than the
// database being away (store.Transient), or shutdown ends; it returns f's
// last error. The message it writes for stays unacked meanwhile, its
// deadline extended: an outage must not use up its deliveries.
func (p *Processor) retryDB(shutdown context.Context, f func() error) error {
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil || !store.Transient(err) {
			return err
		}
		if attempt == 1 && store.Away(err) {
			defer p.outage.wait()() // as in commitWithRetry
		}
		p.dbFailed(1, attempt, err)
		if backoff.Sleep(shutdown, infraBackoff.Next(attempt)) != nil {
			return err
		}
	}
}

// committed records outcomes, acks, and publishes the batch's outbox rows,
// after the commit.
func (p *Processor) committed(b []*item, outbox []store.OutboxRow, pub *acker) {
	p.o.Metrics.LastCommit.SetToCurrentTime()
	for _, it := range b {
		if it.reject != nil {
			continue
		}
		o := it.outcome
		p.o.Metrics.Processed.WithLabelValues(it.ev.Key.Integration, o.String()).Inc()
		if it.unsigned {
			p.o.Metrics.UnsignedEnvelopes.WithLabelValues(it.ev.Key.Integration).Inc()
		}
		it.settled(o.String(), false)
		if o == inbox.Conflict {
			p.o.Metrics.Conflicts.WithLabelValues(it.ev.Key.Integration).Inc()
			p.o.Log.Warn("conflict: same event id, different payload", it.logArgs("key", it.ev.Key.String(), "stream_seq", it.ev.StreamSeq)...)
		}
	}
	if p.faults.AfterCommit != nil {
		if err := p.faults.AfterCommit(); err != nil {
			return
		}
	}
	for _, it := range b {
		if it.reject != nil {
			p.rejected(it)
			continue
		}
		if err := it.msg.Ack(); err != nil {
			// The commit stands; the redelivery will find the row.
			p.o.Log.Warn("ack failed after commit", it.logArgs("key", it.ev.Key.String(), "err", err)...)
		}
	}
	if len(outbox) == 0 {
		return
	}
	// The rows are durable: what fails to publish stays pending and the
	// relay publishes it after outbox.relay_after.
	pub.add(sendRows(p.o.JS, outbox, p.tracer))
}

// handlerFailed decides a handler error's fate: a retry with backoff while
// deliveries remain, else a visible failed (or quarantined) row. The raw
// message stays in INTAKE_IN either way, for replay. Its own writes wait
// out a database that is away (retryDB) until shutdown.
func (p *Processor) handlerFailed(work, shutdown context.Context, it *item, herr error) {
	ev := it.ev
	status := inbox.StatusFailed
	if errors.Is(herr, ErrQuarantine) {
		status = inbox.StatusQuarantined
	}
	final := errors.Is(herr, ErrPermanent) || errors.Is(herr, ErrQuarantine)
	last := ev.Delivery >= uint64(p.o.Config.MaxDeliver)
	if in, ok := p.integrations[ev.Key.Integration]; ok && in.guardsReplays {
		// The body stays this key's (replay guard): a copy under a fresh id
		// must not take it while the event waits for its retry or replay.
		err := p.retryDB(shutdown, func() error {
			return store.KeepFirstKey(work, p.o.Store.Pool(), ev.Key, ev.EventType, ev.PayloadSHA256)
		})
		if err != nil {
			p.o.Log.Warn("replay guard: body not recorded for a failed event", "key", ev.Key.String(), "err", err)
		}
	}
	p.o.Metrics.FailureDelivery.WithLabelValues(ev.Key.Integration).Observe(float64(ev.Delivery))
	if !final && !last {
		p.o.Metrics.Failures.WithLabelValues(ev.Key.Integration, "retry", ev.handler).Inc()
		it.settled("retry", true)
		p.o.Log.Warn("handler failed; will retry", it.logArgs(ev.handlerArgs("key", ev.Key.String(), "delivery", ev.Delivery, "err", herr)...)...)
		delay := p.backoff(ev.Delivery)
		next := time.Now().Add(delay)
		p.recordAttempt(work, ev, herr, &next)
		_ = it.msg.NakWithDelay(delay)
		return
	}
	p.recordAttempt(work, ev, herr, nil)
	p.o.Metrics.Failures.WithLabelValues(ev.Key.Integration, string(status), ev.handler).Inc()
	it.settled(string(status), true)
	p.o.Log.Error("handler failed; recording",
		it.logArgs(ev.handlerArgs("key", ev.Key.String(), "status", status, "delivery", ev.Delivery, "err", herr)...)...)
	var d *store.DeliveryRecord
	if ev.ReplayMode == inbox.ReplayNone {
		accepted := ev.acceptedDelivery()
		d = &accepted
	}
	err := p.retryDB(shutdown, func() error {
		return store.RecordFailure(work, p.o.Store.Pool(), ev.claim(), d, status, int(ev.Delivery), herr.Error())
	})
	if err != nil {
		// Not recorded (shutting down while the database is away, or it
		// refuses the row): leave the message unacked so it comes back.
		p.o.Log.Error("recording failure failed", "key", ev.Key.String(), "err", err)
		_ = it.msg.NakWithDelay(5 * time.Second)
		return
	}
	_ = it.msg.TermWithReason("handler failed: " + string(status))
}

// attemptRecordTimeout bounds the write of an attempt record: it is what
// operators see of a retrying event, not a decision, so a database that is
// slow or away delays the retry by at most this much and loses the record
// (logged), never the event.
const attemptRecordTimeout = 5 * time.Second

// recordAttempt writes ev's failed attempt (intake.handler_attempts): its
// error and class, and when the next one is due (nil: this was the last,
// about to be recorded failed or quarantined).
func (p *Processor) recordAttempt(work context.Context, ev *Event, herr error, next *time.Time) {
	ctx, cancel := context.WithTimeout(work, attemptRecordTimeout)
	defer cancel()
	err := p.o.Store.RecordAttempt(ctx, store.Attempt{Key: ev.Key, Tenant: ev.Tenant, EventType: ev.EventType,
		PayloadSHA256: ev.PayloadSHA256, StreamSeq: int64(ev.StreamSeq), Delivery: int(ev.Delivery),
		MaxDeliver: p.o.Config.MaxDeliver, Handler: ev.handler, ErrorClass: ErrorClass(herr), Error: herr.Error(),
		ReceivedAt: ev.ReceivedAt, NextAttemptAt: next})
	if err != nil {
		p.o.Log.Warn("handler attempt not recorded (the event is retried all the same)", "key", ev.Key.String(), "err", err)
	}
}

// keepInProgress sends InProgress for every message every AckWait/3 until
// stopped, so neither a slow batch nor one waiting out the database
// outlives its deadlines. A message already settled is skipped (nats.go
// sends nothing for it).
func (p *Processor) keepInProgress(msgs []jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(p.o.Config.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				for _, m := range msgs {
					_ = m.InProgress()
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func (p *Processor) backoff(delivery uint64) time.Duration {
	steps := p.o.Config.Backoff
	i := min(max(int(delivery)-1, 0), len(steps)-1)
	return steps[i]
}

// infraBackoff spaces retries while the database is unreachable: from
// about 100ms up to 5s.
var infraBackoff = backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
