package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
)

// FoldRefusals records ingress's refusal summaries
// (intake.ingress_refusals). Idempotent: a summary folded twice is
// recorded once.
func FoldRefusals(ctx context.Context, tx pgx.Tx, ss []envelope.RefusalSummary) (int, error) {
	var ids, integrations, instances, reasons []string
	var starts, ends []time.Time
	var codes []int32
	var counts []int64
	for _, s := range ss {
		for _, c := range s.Counts {
			ids, integrations, instances = append(ids, s.ID), append(integrations, s.Integration), append(instances, s.Instance)
			starts, ends = append(starts, s.WindowStart), append(ends, s.WindowEnd)
			codes, reasons, counts = append(codes, int32(c.StatusCode)), append(reasons, c.Reason), append(counts, c.Count)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	tag, err := tx.Exec(ctx, `
		INSERT INTO intake.ingress_refusals (summary_id, integration, instance, window_start, window_end,
			status_code, reason, refusals)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[],
			$6::int[], $7::text[], $8::bigint[])
		ON CONFLICT (summary_id, status_code, reason) DO NOTHING`,
		ids, integrations, instances, starts, ends, codes, reasons, counts)
	if err != nil {
		return 0, fmt.Errorf("store: fold refusals: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// RefusalCount is how many requests to one integration ingress refused
// with one status code and reason.
type RefusalCount struct {
	Integration string
	StatusCode  int
	Reason      string
	Count       int64
}

// RefusalsSince sums the refusals of the summaries that ended at or after
// since, by integration, status code and reason (the busiest first).
func (s *Store) RefusalsSince(ctx context.Context, since time.Time) ([]RefusalCount, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT integration, status_code, reason, sum(refusals)::bigint
		FROM intake.ingress_refusals WHERE window_end >= $1
		GROUP BY 1, 2, 3 ORDER BY 1, 4 DESC, 2, 3`, since)
	if err != nil {
		return nil, fmt.Errorf("store: refusals since: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RefusalCount, error) {
		var c RefusalCount
		return c, r.Scan(&c.Integration, &c.StatusCode, &c.Reason, &c.Count)
	})
	if err != nil {
		return nil, fmt.Errorf("store: refusals since: %w", err)
	}
	return out, nil
}
