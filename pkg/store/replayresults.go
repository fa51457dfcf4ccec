package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// What became of a replay's items, as the records the processor left show
// it (ReplayResults). A dry run predicts outcomes (would_apply, …); these are
// what happened.
const (
	// ResultProcessed: the handler ran for the event under this replay (an
	// execution records the replay's id).
	ResultProcessed = "processed"
	// ResultFailedAgain: the processor settled the copy without running
	// the handler to a commit: the inbox row is still failed or
	// quarantined (exact), or no execution of a re-execution committed.
	ResultFailedAgain = "failed_again"
	// ResultDeduplicated: the processor settled the copy and applied
	// nothing: the event was processed already (exact mode).
	ResultDeduplicated = "deduplicated"
	// ResultStale: the object-version guard refused the copy (exact mode).
	ResultStale = "stale"
	// ResultRejected: the processor refused the copy before the inbox
	// decision (a rejected_messages row at the copy's sequence).
	ResultRejected = "rejected"
	// ResultConflict: the copy's payload was not the inbox row's; a
	// conflict record names the copy's sequence.
	ResultConflict = "conflict"
	// ResultInFlight: published, not yet settled by the processor (above
	// its consumer's ack floor): still being tried, or about to be.
	ResultInFlight = "in_flight"
	// ResultUnpublished: not published: the replay was cancelled or
	// failed before it (or is still running, for a caller that asks then).
	ResultUnpublished = "unpublished"
	// ResultMissing: the source message was gone; nothing was published.
	ResultMissing = "missing"
	// ResultNoRecord: settled, and the event has no inbox row (purged, or
	// a commit lost in a failover that the re-drive will find).
	ResultNoRecord = "no_record"
)

// ResultCount is the number of a replay's items with one predicted outcome
// and one result.
type ResultCount struct {
	Predicted string
	Result    string
	Count     int64
}

// ReplayResults says what became of each item of replay id (mode exact or
// reexecute), counted by predicted outcome and result: settled is the
// processor consumer's ack floor — a published copy at or below it has been
// acknowledged or terminated, and its lack of an execution means the
// handler did not commit under this replay. The decision is read from the
// rows the processor writes: executions with the replay's id, rejections
// and conflict records at the copy's sequence, and the inbox row's status.
func (s *Store) ReplayResults(ctx context.Context, id, mode string, settled uint64) ([]ResultCount, error) {
	if !validUUID(id) {
		return nil, ErrNotFound
	}
	rows, err := s.pool.Query(ctx, `
		SELECT ri.outcome, x.result, count(*)
		FROM intake.replay_items ri
		LEFT JOIN intake.inbox i ON i.integration = ri.integration AND i.account = ri.account AND i.event_id = ri.event_id
		CROSS JOIN LATERAL (SELECT CASE
			WHEN ri.state = 'missing' THEN 'missing'
			WHEN ri.state = 'pending' THEN 'unpublished'
			WHEN EXISTS (SELECT 1 FROM intake.rejected_messages j WHERE j.stream_seq = ri.published_seq
				AND j.integration = ri.integration AND j.account = ri.account AND j.event_id = ri.event_id) THEN 'rejected'
			WHEN EXISTS (SELECT 1 FROM intake.executions e WHERE e.replay_id = $1::text
				AND e.integration = ri.integration AND e.account = ri.account AND e.event_id = ri.event_id) THEN 'processed'
			WHEN EXISTS (SELECT 1 FROM intake.conflicts c WHERE c.conflicting_stream_seq = ri.published_seq
				AND c.integration = ri.integration AND c.account = ri.account AND c.event_id = ri.event_id) THEN 'conflict'
			WHEN ri.published_seq > $3 THEN 'in_flight'
			WHEN i.status IS NULL THEN 'no_record'
			WHEN $2 = 'reexecute' OR i.status IN ('failed', 'quarantined') THEN 'failed_again'
			WHEN i.status = 'stale' THEN 'stale'
			ELSE 'deduplicated' END AS result) x
		WHERE ri.replay_id = $1::text::uuid
		GROUP BY 1, 2 ORDER BY 1, 2`, id, mode, int64(settled))
	if err != nil {
		return nil, fmt.Errorf("store: replay results: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ResultCount, error) {
		var c ResultCount
		err := row.Scan(&c.Predicted, &c.Result, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: replay results: %w", err)
	}
	return out, nil
}
