package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/intakehq/intake/pkg/envelope"
)

// Inbox statuses. A row is written in its final status by the transaction
// that applies (or refuses) the event, so no in-flight status is visible.
const (
	StatusProcessed   = "processed"
	StatusStale       = "stale"
	StatusFailed      = "failed"
	StatusQuarantined = "quarantined"
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

// Outcome says what a claim found.
type Outcome int

// Outcomes of ClaimInbox.
const (
	// New: the row was created; the caller applies the event in this transaction.
	New Outcome = iota + 1
	// Duplicate: same key and payload arrived again as another stream message
	// (a provider retry past the stream's duplicate window); counted.
	Duplicate
	// Redelivered: the very stream message that created the row came back
	// (its ack was lost); nothing is counted or applied.
	Redelivered
	// Conflict: same key, other payload; recorded in conflicts, original untouched.
	Conflict
)

func (o Outcome) String() string {
	switch o {
	case New:
		return "new"
	case Duplicate:
		return "duplicate"
	case Redelivered:
		return "redelivered"
	case Conflict:
		return "conflict"
	}
	return "unknown"
}

// ClaimInbox claims c's inbox row inside tx with INSERT … ON CONFLICT DO
// NOTHING (never check-then-insert, so two processors racing on the same key
// serialise on the primary key) and classifies the message. For New the row
// is written as processed: if the caller's transaction rolls back, the claim
// disappears with it.
func ClaimInbox(ctx context.Context, tx pgx.Tx, c Claim) (Outcome, error) {
	var inserted bool
	err := tx.QueryRow(ctx, `
		INSERT INTO intake.inbox (integration, account, event_id, tenant, event_type, payload_sha256,
			status, first_received_at, last_received_at, processed_at, stream_seq)
		VALUES ($1, $2, $3, $4, $5, $6, 'processed', $7, $7, now(), $8)
		ON CONFLICT (integration, account, event_id) DO NOTHING
		RETURNING true`,
		c.Key.Integration, c.Key.Account, c.Key.EventID, c.Tenant, c.EventType, c.PayloadSHA256,
		c.ReceivedAt, int64(c.StreamSeq),
	).Scan(&inserted)
	if err == nil {
		return New, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("store: claim inbox %s: %w", c.Key, err)
	}

	// The row exists (possibly committed by another processor a moment ago:
	// the INSERT waited for it). Lock it and compare.
	var origSHA string
	var origSeq int64
	err = tx.QueryRow(ctx, `
		SELECT payload_sha256, stream_seq FROM intake.inbox
		WHERE integration = $1 AND account = $2 AND event_id = $3
		FOR UPDATE`,
		c.Key.Integration, c.Key.Account, c.Key.EventID,
	).Scan(&origSHA, &origSeq)
	if err != nil {
		return 0, fmt.Errorf("store: read inbox %s: %w", c.Key, err)
	}
	switch {
	case origSHA == c.PayloadSHA256 && origSeq == int64(c.StreamSeq):
		return Redelivered, nil
	case origSHA == c.PayloadSHA256:
		// Counted once per stream message: a redelivery of this duplicate
		// message would count again, which the receipts fold (delivery
		// history) will make exact; until then this is a close upper bound.
		_, err = tx.Exec(ctx, `
			UPDATE intake.inbox
			SET delivery_count = delivery_count + 1, last_received_at = greatest(last_received_at, $4)
			WHERE integration = $1 AND account = $2 AND event_id = $3`,
			c.Key.Integration, c.Key.Account, c.Key.EventID, c.ReceivedAt)
		if err != nil {
			return 0, fmt.Errorf("store: count duplicate %s: %w", c.Key, err)
		}
		return Duplicate, nil
	default:
		_, err = tx.Exec(ctx, `
			INSERT INTO intake.conflicts (integration, account, event_id, tenant, original_sha256,
				conflicting_sha256, original_stream_seq, conflicting_stream_seq, received_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (integration, account, event_id, conflicting_stream_seq) DO NOTHING`,
			c.Key.Integration, c.Key.Account, c.Key.EventID, c.Tenant, origSHA, c.PayloadSHA256,
			origSeq, int64(c.StreamSeq), c.ReceivedAt)
		if err != nil {
			return 0, fmt.Errorf("store: record conflict %s: %w", c.Key, err)
		}
		return Conflict, nil
	}
}

// RecordFailure writes the inbox row of an event whose handler failed for
// good as status failed, with the error, outside the handler's (rolled back)
// transaction. A row that already exists in another status is left alone.
func RecordFailure(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, c Claim, attempts int, reason string) error {
	_, err := db.Exec(ctx, `
		INSERT INTO intake.inbox (integration, account, event_id, tenant, event_type, payload_sha256,
			status, attempts, first_received_at, last_received_at, stream_seq, error)
		VALUES ($1, $2, $3, $4, $5, $6, 'failed', $7, $8, $8, $9, $10)
		ON CONFLICT (integration, account, event_id) DO UPDATE
		SET attempts = EXCLUDED.attempts, error = EXCLUDED.error
		WHERE intake.inbox.status = 'failed'`,
		c.Key.Integration, c.Key.Account, c.Key.EventID, c.Tenant, c.EventType, c.PayloadSHA256,
		attempts, c.ReceivedAt, int64(c.StreamSeq), reason)
	if err != nil {
		return fmt.Errorf("store: record failure %s: %w", c.Key, err)
	}
	return nil
}
