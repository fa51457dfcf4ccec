package processor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
)

// Relay publishes the outbox rows no processor published: a processor
// publishes its batch's rows right after the commit, and the relay takes
// what stays pending longer than outbox.relay_after (the processor died,
// or lost NATS, before its PubAcks). Several relays may run (one per
// processor pod): rows are claimed with FOR UPDATE SKIP LOCKED, and a row
// published twice carries the same Nats-Msg-Id and is dropped by the
// stream's duplicate window.
type Relay struct {
	store   *store.Store
	js      jetstream.JetStream
	cfg     config.Outbox
	metrics *telemetry.Metrics
	log     *slog.Logger
	tracer  trace.Tracer // nil: tracing off
	lagAt   time.Time    // the last observeLag
	// goneLogged is when a row whose payload left INTAKE_IN was last logged.
	goneLogged time.Time
}

// lagEvery bounds how stale the outbox gauges get while the relay is busy
// (it reads them after every pass that found nothing, else at most this often).
const lagEvery = 10 * time.Second

// RelayOptions configure a Relay.
type RelayOptions struct {
	Store *store.Store        // required
	JS    jetstream.JetStream // required
	// Config is the outbox section; unset fields get config's defaults
	// (config.Outbox.WithDefaults) and the result is validated.
	Config config.Outbox
	// DuplicateWindow is nats.stream.duplicate_window, the window of
	// INTAKE_OUT: outbox.relay_after defaults from it and must be at most
	// half of it. Defaults to config.DefaultDuplicateWindow.
	DuplicateWindow time.Duration
	Metrics         *telemetry.Metrics // defaults to a private registry
	Log             *slog.Logger       // defaults to discarding
	// TracerProvider gives each relayed row that carries its event's trace
	// a publish span; nil (the default) is tracing off.
	TracerProvider trace.TracerProvider
}

// NewRelay fills o's defaults, then validates it: a bad value is an
// error naming its field, never silently replaced.
func NewRelay(o RelayOptions) (*Relay, error) {
	if o.Store == nil || o.JS == nil {
		return nil, errors.New("relay: RelayOptions.Store and RelayOptions.JS are required")
	}
	window := cmp.Or(o.DuplicateWindow, config.DefaultDuplicateWindow)
	cfg := o.Config.WithDefaults(window)
	if err := cfg.Validate(window); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	if o.Metrics == nil {
		o.Metrics = telemetry.NewMetrics()
	}
	if o.Log == nil {
		o.Log = telemetry.Discard()
	}
	return &Relay{store: o.Store, js: o.JS, cfg: cfg, metrics: o.Metrics, log: o.Log, tracer: telemetry.Tracer(o.TracerProvider)}, nil
}

// Config is the outbox configuration in force, defaults filled.
func (r *Relay) Config() config.Outbox { return r.cfg }

// Run publishes until ctx ends, polling every PollInterval.
func (r *Relay) Run(ctx context.Context) error {
	failures := 0
	nextClean := time.Now()
	for {
		if time.Now().After(nextClean) {
			r.clean(ctx)
			nextClean = time.Now().Add(time.Minute)
		}
		n, err := r.publishPending(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := r.cfg.PollInterval
		if err != nil {
			wait = infraBackoff.Next(failures)
			failures++
			r.log.Warn("outbox relay pass failed", "err", err, "retry_in", wait)
		} else {
			failures = 0
			if n > 0 {
				continue // more may be waiting
			}
		}
		if backoff.Sleep(ctx, wait) != nil {
			return nil
		}
	}
}

// publishPending runs one claim-publish transaction and returns the number
// of rows it published. Rows that got a PubAck stay claimed even when
// others failed; the failed ones go back on the pending list.
func (r *Relay) publishPending(ctx context.Context) (int, error) {
	published, fresh := 0, 0
	var pubErr error
	err := pgx.BeginFunc(ctx, r.store.Pool(), func(tx pgx.Tx) error {
		rows, err := store.ClaimOutbox(ctx, tx, r.cfg.BatchSize, r.cfg.RelayAfter)
		if err != nil || len(rows) == 0 {
			return err
		}
		if rows, err = r.readPayloads(ctx, tx, rows); err != nil {
			return err
		}
		res := publishRows(ctx, r.js, rows, r.tracer)
		if res.err != nil {
			if err := store.Unpublish(ctx, tx, res.failed, res.err.Error()); err != nil {
				return err
			}
		}
		published, fresh, pubErr = len(res.ok), len(res.ok)-res.dups, res.err
		return nil
	})
	if err != nil {
		return 0, err
	}
	// Copies INTAKE_OUT dropped were published before (by a processor that
	// did not get to mark them): not counted again.
	r.metrics.OutboxPublished.Add(float64(fresh))
	r.metrics.OutboxRelayed.Add(float64(fresh))
	if published == 0 || time.Since(r.lagAt) >= lagEvery {
		r.observeLag(ctx)
	}
	return published, pubErr
}

// readPayloads reads from INTAKE_IN the payloads of the rows that keep
// only its sequence (store.OutboxRow.PayloadSeq) and returns the rows to
// publish. A row whose message is no longer the stream's
// (stream.ErrPayloadGone: past nats.stream.max_age, deleted, the stream
// made again) goes back on the pending list with the reason and is not
// published: it stays in the outbox lag, and its alert, for an operator
// (restoring the stream makes it publishable again), logged at most once a
// minute. The pass goes on with the other rows. Any other read error ends
// the pass.
func (r *Relay) readPayloads(ctx context.Context, tx pgx.Tx, rows []store.OutboxRow) ([]store.OutboxRow, error) {
	var in jetstream.Stream
	out := rows[:0]
	for _, row := range rows {
		if row.PayloadSeq == 0 || row.Payload != nil {
			out = append(out, row)
			continue
		}
		if in == nil {
			s, err := r.js.Stream(ctx, envelope.StreamIn)
			if err != nil {
				return nil, fmt.Errorf("relay: %s: %w", envelope.StreamIn, err)
			}
			in = s
		}
		body, sha, err := stream.InPayload(ctx, in, row.PayloadSeq, row.Key)
		if errors.Is(err, stream.ErrPayloadGone) {
			if err := store.Unpublish(ctx, tx, []string{row.ID}, err.Error()); err != nil {
				return nil, err
			}
			r.metrics.OutboxPayloadGone.Inc()
			if time.Since(r.goneLogged) >= time.Minute {
				r.goneLogged = time.Now()
				r.log.Error("outbox row cannot be published: its payload is gone from INTAKE_IN; it stays pending",
					"outbox_id", row.ID, "key", row.Key.String(), "err", err)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("relay: %w", err)
		}
		row.SetStreamPayload(body, sha)
		out = append(out, row)
	}
	return out, nil
}

func (r *Relay) observeLag(ctx context.Context) {
	r.lagAt = time.Now()
	n, age, err := r.store.OutboxLag(ctx)
	if err != nil {
		return
	}
	r.metrics.OutboxPending.Set(float64(n))
	r.metrics.OutboxLag.Set(age.Seconds())
}

// PreparePartitions makes the outbox's partitions for the coming days
// before the processor's first insert: the migration made a week's, and a
// processor started after a longer pause finds none for today. Failing to
// (another processor's pass holding the lock, a role that may not create
// tables) is a warning while the partitions made reach past the next hour
// — Run tries again every minute — and an error when they do not: every
// outbox insert would fail.
func (r *Relay) PreparePartitions(ctx context.Context) error {
	return r.preparePartitions(ctx, time.Now())
}

func (r *Relay) preparePartitions(ctx context.Context, now time.Time) error {
	until, err := r.makePartitions(ctx, now)
	if err == nil {
		return nil
	}
	if until.Before(now.Add(time.Hour)) {
		return fmt.Errorf("outbox partitions end at %s: %w", until.Format(time.RFC3339), err)
	}
	r.log.Warn("outbox partitions: making the next days' failed", "err", err, "until", until)
	return nil
}

// makePartitions makes the outbox's daily partitions through
// store.OutboxDaysAhead days after now, and returns the error of that and
// where the partitions end (the zero time when that cannot be read; the
// gauge of how far ahead they reach is set when it can).
func (r *Relay) makePartitions(ctx context.Context, now time.Time) (time.Time, error) {
	_, err := r.store.AddOutboxPartitions(ctx, now)
	until, uerr := r.store.OutboxPartitionsUntil(ctx)
	if uerr != nil {
		return time.Time{}, err
	}
	r.metrics.OutboxPartitionsAhead.Set(until.Sub(now).Seconds())
	return until, err
}

// clean keeps the outbox's daily partitions: made OutboxDaysAhead days
// ahead, and dropped a day at a time once every row in one is older than
// the retention and none is pending (store.DropOutboxPartitions). Every
// processor's relay runs it; the database serialises them.
func (r *Relay) clean(ctx context.Context) {
	now := time.Now()
	if until, err := r.makePartitions(ctx, now); err != nil && ctx.Err() == nil {
		r.log.Warn("outbox partitions: making the next days' failed", "err", err, "until", until)
	}
	if r.cfg.Retention <= 0 {
		return
	}
	dropped, err := r.store.DropOutboxPartitions(ctx, now.Add(-r.cfg.Retention), false)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("outbox partitions: dropping those past retention failed", "err", err)
		}
		return
	}
	for _, d := range dropped {
		r.metrics.PurgeRows.WithLabelValues("outbox").Add(float64(d.Rows))
		r.log.Info("outbox partition past retention dropped", "partition", d.Name, "rows", d.Rows)
	}
}
