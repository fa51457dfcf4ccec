package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The console's overview reads these aggregates, each on an existing
// index's range (the window's rows; outbox_pending is small).

// ReceivedCount is one integration's events first received since a time:
// their count, their extra deliveries, and the p50 and p95 of first
// receipt to processed among those processed without a replay (a replay's
// run, hours later, is an operator's decision, not processing lag).
type ReceivedCount struct {
	Integration    string
	Events         int64
	Duplicates     int64
	LagP50, LagP95 time.Duration
}

// ReceivedSince counts the events first received at or after since, by
// integration (inbox_received_idx).
func (s *Store) ReceivedSince(ctx context.Context, since time.Time) ([]ReceivedCount, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT integration, count(*), coalesce(sum(greatest(delivery_count - 1, 0)), 0),
			coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM processed_at - first_received_at))
				FILTER (WHERE processed_at IS NOT NULL AND NOT replayed), 0),
			coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM processed_at - first_received_at))
				FILTER (WHERE processed_at IS NOT NULL AND NOT replayed), 0)
		FROM (SELECT i.*, EXISTS (SELECT 1 FROM intake.executions x
				WHERE x.integration = i.integration AND x.account = i.account AND x.event_id = i.event_id
				  AND x.mode <> 'original') AS replayed
			FROM intake.inbox i WHERE i.first_received_at >= $1) i
		GROUP BY integration`, since)
	if err != nil {
		return nil, fmt.Errorf("store: received since: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ReceivedCount, error) {
		var c ReceivedCount
		var p50, p95 float64
		err := row.Scan(&c.Integration, &c.Events, &c.Duplicates, &p50, &p95)
		c.LagP50, c.LagP95 = seconds(p50), seconds(p95)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: received since: %w", err)
	}
	return out, nil
}

// seconds is a duration of s seconds, to the millisecond.
func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

// UnresolvedSince counts the failed and quarantined inbox rows whose last
// delivery was at or after since, by integration and status
// (inbox_status_idx).
func (s *Store) UnresolvedSince(ctx context.Context, since time.Time) ([]StatusCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT integration, status, count(*) FROM intake.inbox
		WHERE status IN ('failed', 'quarantined') AND last_received_at >= $1 GROUP BY 1, 2`, since)
	if err != nil {
		return nil, fmt.Errorf("store: unresolved since: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StatusCount, error) {
		var c StatusCount
		err := row.Scan(&c.Integration, &c.Status, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: unresolved since: %w", err)
	}
	return out, nil
}

// IntegrationCount is a count of one integration's rows.
type IntegrationCount struct {
	Integration string
	Count       int64
}

// ConflictsSince counts the conflicts detected at or after since, by
// integration.
func (s *Store) ConflictsSince(ctx context.Context, since time.Time) ([]IntegrationCount, error) {
	return s.integrationCounts(ctx, "conflicts since",
		`SELECT integration, count(*) FROM intake.conflicts WHERE detected_at >= $1 GROUP BY integration`, since)
}

// RejectedSince counts the messages the processor rejected (before the
// inbox decision: intake.rejected_messages) at or after since, by
// integration.
func (s *Store) RejectedSince(ctx context.Context, since time.Time) ([]IntegrationCount, error) {
	return s.integrationCounts(ctx, "rejected since",
		`SELECT integration, count(*) FROM intake.rejected_messages WHERE rejected_at >= $1 GROUP BY integration`, since)
}

// OutboxPendingByIntegration counts the outbox rows not yet published, by
// integration.
func (s *Store) OutboxPendingByIntegration(ctx context.Context) ([]IntegrationCount, error) {
	return s.integrationCounts(ctx, "outbox pending", `SELECT o.integration, count(*) FROM intake.outbox_pending p
		JOIN intake.outbox o ON o.id = p.id GROUP BY o.integration`)
}

func (s *Store) integrationCounts(ctx context.Context, what, sql string, args ...any) ([]IntegrationCount, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (IntegrationCount, error) {
		var c IntegrationCount
		err := row.Scan(&c.Integration, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return out, nil
}

// HourCount is one integration's events first received in one hour (or
// bucket: BucketedSince), with the failed and quarantined among them.
type HourCount struct {
	Integration string
	Hour        time.Time
	Events      int64
	Unresolved  int64
}

// HourlySince counts the events first received at or after since, by
// integration and hour (inbox_received_idx).
func (s *Store) HourlySince(ctx context.Context, since time.Time) ([]HourCount, error) {
	return s.BucketedSince(ctx, since, time.Hour)
}

// BucketedSince counts the events first received at or after since, by
// integration and bucket of width: the buckets are aligned to since
// truncated to width (whole hours for an hour), HourCount.Hour is the
// bucket's start (inbox_received_idx).
func (s *Store) BucketedSince(ctx context.Context, since time.Time, width time.Duration) ([]HourCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT integration, date_bin($2::bigint * interval '1 second', first_received_at, $3::timestamptz), count(*),
			count(*) FILTER (WHERE status IN ('failed', 'quarantined'))
		FROM intake.inbox WHERE first_received_at >= $1 GROUP BY 1, 2`, since, int64(width/time.Second), since.Truncate(width))
	if err != nil {
		return nil, fmt.Errorf("store: counts by %s since: %w", width, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (HourCount, error) {
		var c HourCount
		err := row.Scan(&c.Integration, &c.Hour, &c.Events, &c.Unresolved)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: counts by %s since: %w", width, err)
	}
	return out, nil
}
