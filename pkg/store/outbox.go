package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
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

// ClaimOutbox marks up to limit unpublished rows published, in commit
// order, skipping rows another relay holds, and returns them — one statement
// that both locks and marks. The caller publishes them and commits only
// when every PubAck arrived; rows whose publish failed go back with
// Unpublish before the commit (or the whole transaction rolls back).
func ClaimOutbox(ctx context.Context, tx pgx.Tx, limit int) ([]OutboxRow, error) {
	rows, err := tx.Query(ctx, `
		UPDATE intake.outbox o SET published_at = now(), attempts = o.attempts + 1
		FROM (SELECT id FROM intake.outbox WHERE published_at IS NULL
			ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED) AS c
		WHERE o.id = c.id
		RETURNING o.id::text, o.integration, o.account, o.event_id, o.subject, o.headers, o.payload, o.created_at, o.seq`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: claim outbox: %w", err)
	}
	type seqRow struct {
		OutboxRow
		seq int64
	}
	out := make([]seqRow, 0, limit)
	out, err = pgx.AppendRows(out, rows, func(row pgx.CollectableRow) (seqRow, error) {
		var r seqRow
		var hdr []byte
		if err := row.Scan(&r.ID, &r.Key.Integration, &r.Key.Account, &r.Key.EventID, &r.Subject, &hdr, &r.Payload, &r.Created, &r.seq); err != nil {
			return r, err
		}
		var err error
		r.Headers, err = parseHeadersJSON(hdr)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim outbox: %w", err)
	}
	// UPDATE … RETURNING does not keep the subquery's order.
	slices.SortFunc(out, func(a, b seqRow) int { return cmp.Compare(a.seq, b.seq) })
	res := make([]OutboxRow, len(out))
	for i := range out {
		res[i] = out[i].OutboxRow
	}
	return res, nil
}

// Unpublish returns rows whose publish failed to the pending state, with the
// reason, inside the claiming transaction.
func Unpublish(ctx context.Context, tx pgx.Tx, ids []string, reason string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `UPDATE intake.outbox SET published_at = NULL, last_error = $2
		WHERE id = ANY($1::uuid[])`, ids, reason)
	if err != nil {
		return fmt.Errorf("store: unpublish outbox rows: %w", err)
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
