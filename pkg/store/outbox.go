package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
)

// OutboxRow is one message waiting for (or done with) INTAKE_OUT.
type OutboxRow struct {
	ID      string // uuid; the Nats-Msg-Id on INTAKE_OUT
	Key     envelope.Key
	Subject string
	Headers map[string][]string
	Payload []byte
	Created time.Time
}

// ClaimOutbox locks up to limit unpublished rows in commit order, skipping
// rows another relay holds, so several relays never publish the same row at
// the same time.
func ClaimOutbox(ctx context.Context, tx pgx.Tx, limit int) ([]OutboxRow, error) {
	rows, err := tx.Query(ctx, `
		SELECT id::text, integration, account, event_id, subject, headers, payload, created_at
		FROM intake.outbox
		WHERE published_at IS NULL
		ORDER BY seq
		LIMIT $1
		FOR UPDATE SKIP LOCKED`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: claim outbox: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OutboxRow, error) {
		var r OutboxRow
		err := row.Scan(&r.ID, &r.Key.Integration, &r.Key.Account, &r.Key.EventID, &r.Subject, &r.Headers, &r.Payload, &r.Created)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim outbox: %w", err)
	}
	return out, nil
}

// MarkPublished records the PubAck of rows.
func MarkPublished(ctx context.Context, tx pgx.Tx, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `UPDATE intake.outbox SET published_at = now(), attempts = attempts + 1
		WHERE id = ANY($1::uuid[])`, ids)
	if err != nil {
		return fmt.Errorf("store: mark outbox published: %w", err)
	}
	return nil
}

// MarkAttemptFailed records a failed publish attempt without publishing.
func MarkAttemptFailed(ctx context.Context, tx pgx.Tx, ids []string, reason string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `UPDATE intake.outbox SET attempts = attempts + 1, last_error = $2
		WHERE id = ANY($1::uuid[])`, ids, reason)
	if err != nil {
		return fmt.Errorf("store: mark outbox attempt: %w", err)
	}
	return nil
}

// OutboxLag returns the number of unpublished rows and the age of the oldest.
func (s *Store) OutboxLag(ctx context.Context) (int64, time.Duration, error) {
	var n int64
	var oldest *time.Time
	err := s.pool.QueryRow(ctx, `SELECT count(*), min(created_at) FROM intake.outbox WHERE published_at IS NULL`).Scan(&n, &oldest)
	if err != nil {
		return 0, 0, fmt.Errorf("store: outbox lag: %w", err)
	}
	if oldest == nil {
		return n, 0, nil
	}
	return n, time.Since(*oldest), nil
}

// DeletePublished removes rows published before cutoff, at most limit per
// call so a large backlog does not hold one long transaction.
func (s *Store) DeletePublished(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM intake.outbox WHERE id IN (
		SELECT id FROM intake.outbox WHERE published_at < $1 ORDER BY published_at LIMIT $2)`, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("store: clean outbox: %w", err)
	}
	return tag.RowsAffected(), nil
}
