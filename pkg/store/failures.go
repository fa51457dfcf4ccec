package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// FailureGroup is the failed (or quarantined) events that share an
// integration, a status, an error class (their last attempt's) and an
// error signature: one cause, one work item.
type FailureGroup struct {
	ID          string // stable: FailureGroupID of the four fields
	Integration string
	Status      string
	ErrorClass  string
	Signature   string // the error text with numbers and UUIDs masked, at most 160 bytes
	Events      int64
	FirstSeen   time.Time // the earliest last delivery among them
	LastSeen    time.Time
	SampleKeys  []string // the three most recent
	// The latest resolution, if any; Resolved while no event of the
	// group failed after it.
	ResolvedBy *string
	ResolvedAt *time.Time
	Note       *string
	Resolved   bool
}

// FailureGroupID names a group by its four fields.
func FailureGroupID(integration, status, errorClass, signature string) string {
	h := sha256.Sum256([]byte(integration + "\x00" + status + "\x00" + errorClass + "\x00" + signature))
	return hex.EncodeToString(h[:6])
}

// maxFailureGroups bounds a listing.
const maxFailureGroups = 500

// FailureGroups lists the groups of failed and quarantined inbox rows,
// most recent failure first, for integration ("" every one); resolved
// groups only with all.
func (s *Store) FailureGroups(ctx context.Context, integration string, all bool) ([]FailureGroup, error) {
	rows, err := s.pool.Query(ctx, `
		WITH f AS (
			SELECT i.integration, i.status, coalesce(a.error_class, 'error') AS error_class,
				left(regexp_replace(regexp_replace(coalesce(i.error, ''),
					'[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<uuid>', 'g'),
					'[0-9]+', 'N', 'g'), 160) AS signature,
				i.integration || '/' || i.account || '/' || i.event_id AS key, i.last_received_at
			FROM intake.inbox i
			LEFT JOIN LATERAL (SELECT a.error_class FROM intake.handler_attempts a
				WHERE a.integration = i.integration AND a.account = i.account AND a.event_id = i.event_id
				ORDER BY a.failed_at DESC, a.id DESC LIMIT 1) a ON true
			WHERE i.status IN ('failed', 'quarantined') AND ($1 = '' OR i.integration = $1)
		), g AS (
			SELECT integration, status, error_class, signature, count(*) AS events,
				min(last_received_at) AS first_seen, max(last_received_at) AS last_seen,
				(array_agg(key ORDER BY last_received_at DESC))[1:3] AS sample
			FROM f GROUP BY integration, status, error_class, signature
		)
		SELECT g.integration, g.status, g.error_class, g.signature, g.events, g.first_seen, g.last_seen, g.sample,
			r.resolved_by, r.resolved_at, r.note, coalesce(r.resolved_at >= g.last_seen, false)
		FROM g LEFT JOIN LATERAL (SELECT r.resolved_by, r.resolved_at, r.note FROM intake.failure_resolutions r
			WHERE r.integration = g.integration AND r.status = g.status AND r.error_class = g.error_class
			  AND r.signature = g.signature
			ORDER BY r.resolved_at DESC LIMIT 1) r ON true
		WHERE $2 OR NOT coalesce(r.resolved_at >= g.last_seen, false)
		ORDER BY g.last_seen DESC LIMIT `+fmt.Sprint(maxFailureGroups), integration, all)
	if err != nil {
		return nil, fmt.Errorf("store: failure groups: %w", err)
	}
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (FailureGroup, error) {
		var g FailureGroup
		err := row.Scan(&g.Integration, &g.Status, &g.ErrorClass, &g.Signature, &g.Events, &g.FirstSeen, &g.LastSeen,
			&g.SampleKeys, &g.ResolvedBy, &g.ResolvedAt, &g.Note, &g.Resolved)
		g.ID = FailureGroupID(g.Integration, g.Status, g.ErrorClass, g.Signature)
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: failure groups: %w", err)
	}
	return groups, nil
}

// ResolveFailureGroup appends a resolution of g by who with note.
func (s *Store) ResolveFailureGroup(ctx context.Context, g FailureGroup, who, note string) (time.Time, error) {
	var at time.Time
	err := s.pool.QueryRow(ctx, `INSERT INTO intake.failure_resolutions
		(integration, status, error_class, signature, resolved_by, note, events)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING resolved_at`,
		g.Integration, g.Status, g.ErrorClass, g.Signature, who, note, g.Events).Scan(&at)
	if err != nil {
		return at, fmt.Errorf("store: resolve failure group: %w", err)
	}
	return at, nil
}
