package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// queueConflict records c once: a redelivery of the same conflicting
// message (or its record written again after a failover) adds nothing.
func queueConflict(b *pgx.Batch, c ConflictRow) {
	b.Queue(`INSERT INTO intake.conflicts (integration, account, event_id, tenant, original_sha256,
			conflicting_sha256, original_stream_seq, conflicting_stream_seq, received_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (integration, account, event_id, conflicting_stream_seq) DO NOTHING`,
		c.Key.Integration, c.Key.Account, c.Key.EventID, c.Tenant, c.Original.PayloadSHA256, c.PayloadSHA256,
		int64(c.Original.StreamSeq), int64(c.StreamSeq), c.ReceivedAt)
}

// RecordConflicts writes conflict records that were lost (a commit a
// Postgres failover took with it) and returns how many were missing. The
// re-drive writes them itself rather than replaying the message: a
// conflict changes no business row, and a replay runs one message per key
// — the one its row names, not the conflicting one.
func (s *Store) RecordConflicts(ctx context.Context, cs []ConflictRow) (int, error) {
	if len(cs) == 0 {
		return 0, nil
	}
	b := &pgx.Batch{}
	for _, c := range cs {
		queueConflict(b, c)
	}
	br := s.pool.SendBatch(ctx, b)
	n := 0
	for range cs {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return n, fmt.Errorf("store: record conflicts: %w", err)
		}
		n += int(tag.RowsAffected())
	}
	if err := br.Close(); err != nil {
		return n, fmt.Errorf("store: record conflicts: %w", err)
	}
	return n, nil
}

// ConflictSeqs returns which of the claims' messages (key and stream
// sequence) have a conflict record.
func (s *Store) ConflictSeqs(ctx context.Context, cs []Claim) (map[uint64]bool, error) {
	out := map[uint64]bool{}
	if len(cs) == 0 {
		return out, nil
	}
	integ, acct, id, seq := make([]string, len(cs)), make([]string, len(cs)), make([]string, len(cs)), make([]int64, len(cs))
	for i, c := range cs {
		integ[i], acct[i], id[i], seq[i] = c.Key.Integration, c.Key.Account, c.Key.EventID, int64(c.StreamSeq)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT c.conflicting_stream_seq FROM intake.conflicts c
		JOIN unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS t(integration, account, event_id, seq)
		  ON c.integration = t.integration AND c.account = t.account AND c.event_id = t.event_id
		 AND c.conflicting_stream_seq = t.seq`, integ, acct, id, seq)
	if err != nil {
		return nil, fmt.Errorf("store: conflict sequences: %w", err)
	}
	var q int64
	_, err = pgx.ForEachRow(rows, []any{&q}, func() error {
		out[uint64(q)] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: conflict sequences: %w", err)
	}
	return out, nil
}
