package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// StatusCount is how many inbox rows of one integration are in one status.
type StatusCount struct {
	Integration string
	Status      string
	Count       int64
}

// UnresolvedCounts counts the failed and quarantined inbox rows by
// integration (all integrations when integrations is empty). It reads
// inbox_status_idx: its cost follows the failed and quarantined rows, not
// the inbox.
func (s *Store) UnresolvedCounts(ctx context.Context, integrations []string) ([]StatusCount, error) {
	var only any // NULL: every integration
	if len(integrations) > 0 {
		only = integrations
	}
	rows, err := s.pool.Query(ctx, `SELECT integration, status, count(*) FROM intake.inbox
		WHERE status IN ('failed', 'quarantined') AND ($1::text[] IS NULL OR integration = ANY($1::text[]))
		GROUP BY integration, status`, only)
	if err != nil {
		return nil, fmt.Errorf("store: unresolved counts: %w", err)
	}
	counts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StatusCount, error) {
		var c StatusCount
		err := row.Scan(&c.Integration, &c.Status, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: unresolved counts: %w", err)
	}
	return counts, nil
}

// ReplayStats summarize intake.replays for the metrics.
type ReplayStats struct {
	ByState map[string]int64 // every state, 0 included
	// RunningMatched and RunningPublished sum the running replays' matched
	// and published events.
	RunningMatched, RunningPublished int64
	// OldestRunning is the age of the oldest running replay; 0 when none runs.
	OldestRunning time.Duration
}

// ReplayStatsNow summarizes intake.replays: one pass over a table that
// holds a row per operator request.
func (s *Store) ReplayStatsNow(ctx context.Context) (ReplayStats, error) {
	st := ReplayStats{ByState: map[string]int64{ReplayRunning: 0, ReplayDone: 0, ReplayFailed: 0, ReplayCancelled: 0}}
	var age *float64
	err := s.pool.QueryRow(ctx, `SELECT
			coalesce(sum(matched) FILTER (WHERE state = 'running'), 0)::bigint,
			coalesce(sum(published) FILTER (WHERE state = 'running'), 0)::bigint,
			extract(epoch FROM now() - min(created_at) FILTER (WHERE state = 'running'))::float8
		FROM intake.replays`).Scan(&st.RunningMatched, &st.RunningPublished, &age)
	if err != nil {
		return st, fmt.Errorf("store: replay stats: %w", err)
	}
	if age != nil {
		st.OldestRunning = time.Duration(*age * float64(time.Second))
	}
	rows, err := s.pool.Query(ctx, `SELECT state, count(*) FROM intake.replays GROUP BY state`)
	if err != nil {
		return st, fmt.Errorf("store: replay stats: %w", err)
	}
	var state string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error { st.ByState[state] = n; return nil }); err != nil {
		return st, fmt.Errorf("store: replay stats: %w", err)
	}
	return st, nil
}
