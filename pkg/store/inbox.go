package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
)

// Claim is one message's claim on its inbox row.
type Claim struct {
	Key           envelope.Key
	Tenant        string
	EventType     string
	PayloadSHA256 string
	StreamSeq     uint64
	ReceivedAt    time.Time
}

// RecordFailure writes the inbox row of an event whose handler failed for
// good — status failed or quarantined, with the error — outside the
// handler's (rolled back) transaction. A row that exists is updated only
// while it is failed or quarantined: a processed event stays processed.
// The delivery that failed (nil for a replay, which is no delivery) enters
// the history like an applied one's, and delivery_count counts it and any
// receipts folded before it, under the same key lock as ClaimBatch and
// FoldReceipts.
func RecordFailure(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, c Claim, d *DeliveryRecord, status inbox.Status, attempts int, reason string) error {
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(lockKeysSQL, []string{c.Key.String()})
		var hist []any
		if d != nil {
			args, err := deliveryArgs([]DeliveryRecord{*d})
			if err != nil {
				return err
			}
			hist = args
			b.Queue(insertDeliveries, hist...)
		}
		b.Queue(`
			INSERT INTO intake.inbox AS i (integration, account, event_id, tenant, event_type, payload_sha256,
				status, attempts, first_received_at, last_received_at, stream_seq, error)
			VALUES ($1, $2, $3, $4, $5, $6, $11, $7, $8, $8, $9, $10)
			ON CONFLICT (integration, account, event_id) DO UPDATE
			SET status = EXCLUDED.status, attempts = i.attempts + 1, error = EXCLUDED.error
			WHERE i.status IN ('failed', 'quarantined')`,
			c.Key.Integration, c.Key.Account, c.Key.EventID, c.Tenant, c.EventType, c.PayloadSHA256,
			attempts, c.ReceivedAt, int64(c.StreamSeq), reason, status)
		if hist != nil {
			b.Queue(recountDeliveries, hist[1:4]...)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("store: record failure %s: %w", c.Key, err)
	}
	return nil
}
