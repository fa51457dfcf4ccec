package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
)

// ReceiptFolder folds delivery receipts from INTAKE_RECEIPTS into the
// delivery history in batches. Every processor pod runs one; they share the
// durable consumer "receipts".
type ReceiptFolder struct {
	store *store.Store
	js    jetstream.JetStream
	cfg   config.Processor
	// integrations are the names a shard's consumer filters on.
	integrations []string
	metrics      *telemetry.Metrics
	log          *slog.Logger
}

// ReceiptFolderOptions configure a ReceiptFolder.
type ReceiptFolderOptions struct {
	Store *store.Store        // required
	JS    jetstream.JetStream // required
	// Config is the processor section (the folder's consumer uses its
	// ack_wait); unset fields get config's defaults
	// (config.Processor.WithDefaults) and the result is validated.
	Config config.Processor
	// Integrations are the configured integrations (config.Config's). With
	// processor.shard set the folder takes only their receipts, and needs
	// some; otherwise they are not used.
	Integrations []config.Integration
	Metrics      *telemetry.Metrics // defaults to a private registry
	Log          *slog.Logger       // defaults to discarding
}

// NewReceiptFolder fills o's defaults, then validates it: a bad value
// is an error naming its field, never silently replaced.
func NewReceiptFolder(o ReceiptFolderOptions) (*ReceiptFolder, error) {
	if o.Store == nil || o.JS == nil {
		return nil, errors.New("receipts: ReceiptFolderOptions.Store and ReceiptFolderOptions.JS are required")
	}
	cfg := o.Config.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("receipts: %w", err)
	}
	if cfg.Shard != "" && len(o.Integrations) == 0 {
		return nil, fmt.Errorf("receipts: %w", errShardWithoutIntegrations)
	}
	if o.Metrics == nil {
		o.Metrics = telemetry.NewMetrics()
	}
	if o.Log == nil {
		o.Log = telemetry.Discard()
	}
	return &ReceiptFolder{store: o.Store, js: o.JS, cfg: cfg, integrations: integrationNames(o.Integrations),
		metrics: o.Metrics, log: o.Log}, nil
}

// Config is the processor configuration the folder uses, defaults filled.
func (f *ReceiptFolder) Config() config.Processor { return f.cfg }

const (
	receiptBatch = config.ReceiptBatch
	receiptWait  = 50 * time.Millisecond
)

// Run folds until ctx ends, then returns nil. Like Processor.Run it
// creates its consumer again when it ends, and returns an error wrapping
// ErrCannotConsume when it cannot (see WithRestartGrace, WithHealth).
func (f *ReceiptFolder) Run(ctx context.Context, opts ...RunOption) error {
	return supervise(ctx, "receipts", newRunOptions(opts), f.log, f.consume)
}

func (f *ReceiptFolder) consume(shutdown, setup context.Context, consuming func()) error {
	cons, err := stream.EnsureReceiptsConsumer(setup, f.js, f.cfg, f.integrations...)
	if err != nil {
		return err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(2 * receiptBatch))
	if err != nil {
		return fmt.Errorf("receipts: pull: %w", err)
	}
	consuming()
	stop := context.AfterFunc(shutdown, it.Drain)
	defer stop()
	batches := make(chan []jetstream.Msg)
	done := make(chan struct{})
	// As the processor's batches: what was drained is still folded.
	work := context.WithoutCancel(shutdown)
	go func() {
		defer close(done)
		for b := range batches {
			f.fold(work, shutdown, b)
		}
	}()
	err = collect(it, receiptBatch, receiptWait, batches)
	close(batches)
	<-done
	it.Stop()
	return err
}

// fold folds one batch of receipts, and of ingress's refusal summaries
// (envelope.HeaderReceiptKind) on the same subjects: work carries the
// transactions and outlives shutdown, which only ends waiting out a
// database that is away.
func (f *ReceiptFolder) fold(work, shutdown context.Context, msgs []jetstream.Msg) {
	rs := make([]envelope.Receipt, 0, len(msgs))
	var ss []envelope.RefusalSummary
	valid, summaries := msgs[:0:0], msgs[:0:0]
	for _, m := range msgs {
		if kind := m.Headers().Get(envelope.HeaderReceiptKind); kind != "" {
			s, err := parseSummary(kind, m)
			if err != nil {
				f.log.Error("terminating malformed refusal summary", "subject", m.Subject(), "err", err)
				_ = m.Term()
				continue
			}
			ss, summaries = append(ss, s), append(summaries, m)
			continue
		}
		r, err := envelope.ParseReceipt(m.Data())
		if err != nil {
			f.log.Error("terminating malformed receipt", "err", err)
			_ = m.Term()
			continue
		}
		rs, valid = append(rs, r), append(valid, m)
	}
	if len(rs) > 0 {
		foldOrSplit(f, work, shutdown, rs, valid, store.FoldReceipts, func(n int) { f.metrics.ReceiptsFolded.Add(float64(n)) },
			func(r envelope.Receipt) []any { return []any{"receipt_id", r.ID, "key", r.Key.String()} })
	}
	if len(ss) > 0 {
		foldOrSplit(f, work, shutdown, ss, summaries, store.FoldRefusals, func(int) {},
			func(s envelope.RefusalSummary) []any { return []any{"summary_id", s.ID, "integration", s.Integration} })
	}
}

// parseSummary reads a refusal summary, which must be about the
// integration of the subject it came on: a shard's publisher speaks for
// its own integrations only.
func parseSummary(kind string, m jetstream.Msg) (envelope.RefusalSummary, error) {
	if kind != envelope.ReceiptKindRefusals {
		return envelope.RefusalSummary{}, fmt.Errorf("unknown %s %q", envelope.HeaderReceiptKind, kind)
	}
	s, err := envelope.ParseRefusalSummary(m.Data())
	if err == nil && m.Subject() != envelope.SubjectReceipt(s.Integration) {
		err = fmt.Errorf("refusal summary: integration %q on subject %s", s.Integration, m.Subject())
	}
	return s, err
}

// foldOrSplit folds items (whose messages are msgs) in one transaction,
// retrying while the failure is not the items' fault (store.Transient:
// the database away or read-only after a failover, a lost race; or a schema
// or privilege error, which an operator must fix and which must not drop
// receipts). A failure that is
// (store.Refused: a NUL or invalid UTF-8 in a text column, a value out of
// range) would recur on every retry of the same batch and freeze
// delivery_count for everyone. The batch is halved until the bad item stands alone; the
// good ones fold, the bad one is logged (no payload), counted and
// terminated — it stays in INTAKE_RECEIPTS for inspection.
func foldOrSplit[T any](f *ReceiptFolder, work, shutdown context.Context, items []T, msgs []jetstream.Msg,
	fold func(context.Context, pgx.Tx, []T) (int, error), folded func(int), describe func(T) []any) {
	for attempt := 0; ; attempt++ {
		var n int
		err := pgx.BeginFunc(work, f.store.Pool(), func(tx pgx.Tx) error {
			var err error
			n, err = fold(work, tx, items)
			return err
		})
		switch {
		case err == nil:
			folded(n)
			for _, m := range msgs {
				_ = m.Ack()
			}
			return
		case store.Refused(err) && len(items) > 1:
			half := len(items) / 2
			foldOrSplit(f, work, shutdown, items[:half], msgs[:half], fold, folded, describe)
			foldOrSplit(f, work, shutdown, items[half:], msgs[half:], fold, folded, describe)
			return
		case store.Refused(err):
			f.metrics.ReceiptsRefused.Inc()
			f.log.Warn("terminating a receipt the database refuses", append(describe(items[0]), "err", err)...)
			_ = msgs[0].TermWithReason("receipt refused by the database")
			return
		}
		f.log.Warn("receipt fold failed; retrying", "receipts", len(items), "err", err)
		if backoff.Sleep(shutdown, infraBackoff.Next(attempt)) != nil {
			for _, m := range msgs {
				_ = m.Nak()
			}
			return
		}
	}
}
