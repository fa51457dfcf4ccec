package processor

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
)

// Relay publishes committed outbox rows to INTAKE_OUT. Several relays may
// run (one per processor pod): rows are claimed with FOR UPDATE SKIP LOCKED,
// and a row published twice (crash after PubAck, before marking) carries the
// same Nats-Msg-Id and is dropped by the stream's duplicate window.
type Relay struct {
	store   *store.Store
	js      jetstream.JetStream
	cfg     config.Outbox
	metrics *telemetry.Metrics
	log     *slog.Logger
}

// NewRelay builds a relay.
func NewRelay(s *store.Store, js jetstream.JetStream, cfg config.Outbox, m *telemetry.Metrics, log *slog.Logger) *Relay {
	if m == nil {
		m = telemetry.NewMetrics()
	}
	if log == nil {
		log = telemetry.Discard()
	}
	return &Relay{store: s, js: js, cfg: cfg, metrics: m, log: log}
}

// Run publishes until ctx ends. It wakes on NOTIFY intake_outbox and polls
// every PollInterval as a fallback (a notification is lost while the
// listening connection is down).
func (r *Relay) Run(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	listenDone := make(chan struct{})
	go func() {
		defer close(listenDone)
		r.listen(ctx, wake)
	}()
	defer func() { <-listenDone }()

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
			failures++
			wait = min(100*time.Millisecond<<min(failures, 6), 5*time.Second)
			r.log.Warn("outbox relay pass failed", "err", err, "retry_in", wait)
		} else {
			failures = 0
			if n > 0 {
				continue // more may be waiting
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-time.After(wait):
		}
	}
}

func (r *Relay) listen(ctx context.Context, wake chan<- struct{}) {
	for ctx.Err() == nil {
		err := r.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			return
		}
		r.log.Debug("outbox listen connection lost; polling until it is back", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (r *Relay) listenOnce(ctx context.Context, wake chan<- struct{}) error {
	conn, err := r.store.Pool().Acquire(ctx)
	if err != nil {
		return err
	}
	// A LISTENing connection must not go back to the pool.
	pc := conn.Hijack()
	defer pc.Close(context.WithoutCancel(ctx))
	if _, err := pc.Exec(ctx, "LISTEN intake_outbox"); err != nil {
		return err
	}
	for {
		if _, err := pc.WaitForNotification(ctx); err != nil {
			return err
		}
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// publishPending runs one claim-publish-mark transaction and returns the
// number of rows it published. Rows that got a PubAck are marked even when
// others failed; the failed ones stay pending for the next pass.
func (r *Relay) publishPending(ctx context.Context) (int, error) {
	published := 0
	var pubErr error
	err := pgx.BeginFunc(ctx, r.store.Pool(), func(tx pgx.Tx) error {
		rows, err := store.ClaimOutbox(ctx, tx, r.cfg.BatchSize)
		if err != nil || len(rows) == 0 {
			return err
		}
		ok, failed, perr := r.publish(ctx, rows)
		if perr != nil {
			if err := store.Unpublish(ctx, tx, failed, perr.Error()); err != nil {
				return err
			}
		}
		published, pubErr = len(ok), perr
		return nil
	})
	if err != nil {
		return 0, err
	}
	r.metrics.OutboxPublished.Add(float64(published))
	if published == 0 {
		r.observeLag(ctx)
	}
	return published, pubErr
}

// publish sends rows asynchronously and waits for every PubAck. It returns
// the ids acknowledged, the ids not acknowledged and the first error.
func (r *Relay) publish(ctx context.Context, rows []store.OutboxRow) (ok, failed []string, firstErr error) {
	futures := make([]jetstream.PubAckFuture, len(rows))
	for i, row := range rows {
		h := nats.Header{}
		for k, v := range row.Headers {
			h[k] = v
		}
		h.Set(envelope.HeaderMsgID, row.ID)
		f, err := r.js.PublishMsgAsync(&nats.Msg{Subject: row.Subject, Header: h, Data: row.Payload})
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("publish outbox %s: %w", row.ID, err)
			}
			continue
		}
		futures[i] = f
	}
	timeout := time.After(10 * time.Second)
	for i, f := range futures {
		if f == nil {
			failed = append(failed, rows[i].ID)
			continue
		}
		select {
		case <-f.Ok():
			ok = append(ok, rows[i].ID)
		case err := <-f.Err():
			failed = append(failed, rows[i].ID)
			if firstErr == nil {
				firstErr = fmt.Errorf("publish outbox %s: %w", rows[i].ID, err)
			}
		case <-timeout:
			failed = append(failed, rows[i].ID)
			if firstErr == nil {
				firstErr = fmt.Errorf("publish outbox %s: no PubAck within 10s", rows[i].ID)
			}
		case <-ctx.Done():
			failed = append(failed, rows[i].ID)
			if firstErr == nil {
				firstErr = ctx.Err()
			}
		}
	}
	return ok, failed, firstErr
}

func (r *Relay) observeLag(ctx context.Context) {
	n, age, err := r.store.OutboxLag(ctx)
	if err != nil {
		return
	}
	r.metrics.OutboxPending.Set(float64(n))
	r.metrics.OutboxLag.Set(age.Seconds())
}

// clean deletes published rows older than the retention period.
func (r *Relay) clean(ctx context.Context) {
	if r.cfg.Retention <= 0 {
		return
	}
	for ctx.Err() == nil {
		n, err := r.store.DeletePublished(ctx, time.Now().Add(-r.cfg.Retention), 1000)
		if err != nil {
			r.log.Warn("outbox cleanup failed", "err", err)
			return
		}
		if n < 1000 {
			return
		}
	}
}
