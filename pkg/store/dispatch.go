package store

import (
	"github.com/intakehq/intake/internal/cut"

	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Outcomes of a dispatch attempt (intake.dispatch_attempts.outcome).
const (
	DispatchDelivered = "delivered" // a 2xx
	DispatchRetry     = "retry"     // another attempt is scheduled
	DispatchFailed    = "failed"    // no attempt left, or an answer no retry can mend
)

// MaxDispatchResponse bounds the answer's body kept in the delivery log.
const MaxDispatchResponse = 1024

// DispatchAttempt is one attempt to push an INTAKE_OUT message to a
// destination (intake.dispatch_attempts).
type DispatchAttempt struct {
	ID            int64 // set when read
	Destination   string
	MsgID         string // the webhook-id
	Key           string
	Integration   string
	Tenant        string
	EventType     string
	StreamSeq     uint64
	Attempt       int
	Outcome       string
	StatusCode    int // 0: no answer
	ErrorClass    string
	Latency       time.Duration
	Response      string
	AttemptedAt   time.Time
	NextAttemptAt *time.Time
}

// dispatchAttemptColumns are the columns RecordDispatchAttempts copies.
var dispatchAttemptColumns = []string{"destination", "msg_id", "key", "integration", "tenant", "event_type",
	"stream_seq", "attempt", "outcome", "status_code", "error_class", "latency_ms", "response", "attempted_at",
	"next_attempt_at"}

// RecordDispatchAttempts writes the attempts with one COPY: for Postgres
// cheaper per row than an INSERT of the same rows (BENCHMARKS.md, the
// dispatcher's throughput).
func (s *Store) RecordDispatchAttempts(ctx context.Context, as []DispatchAttempt) error {
	if len(as) == 0 {
		return nil
	}
	row := make([]any, len(dispatchAttemptColumns)) // pgx encodes a row before it asks for the next
	_, err := s.pool.CopyFrom(ctx, pgx.Identifier{Schema, "dispatch_attempts"}, dispatchAttemptColumns,
		pgx.CopyFromSlice(len(as), func(i int) ([]any, error) {
			a := &as[i]
			var code *int32
			if a.StatusCode != 0 {
				c := int32(a.StatusCode)
				code = &c
			}
			resp := a.Response
			if len(resp) > MaxDispatchResponse {
				resp = cut.UTF8(resp, MaxDispatchResponse)
			}
			row[0], row[1], row[2], row[3], row[4], row[5] = a.Destination, a.MsgID, a.Key, a.Integration, a.Tenant, a.EventType
			row[6], row[7], row[8], row[9], row[10] = int64(a.StreamSeq), int32(a.Attempt), a.Outcome, code, a.ErrorClass
			row[11], row[12], row[13], row[14] = int32(min(a.Latency.Milliseconds(), 1<<31-1)), resp, a.AttemptedAt, a.NextAttemptAt
			return row, nil
		}))
	if err != nil {
		return fmt.Errorf("store: record dispatch attempts: %w", err)
	}
	return nil
}

const dispatchColumns = `id, destination, msg_id, key, integration, tenant, event_type, stream_seq, attempt, outcome,
	coalesce(status_code, 0), error_class, latency_ms, response, attempted_at, next_attempt_at`

func scanDispatchAttempt(row pgx.CollectableRow) (DispatchAttempt, error) {
	var a DispatchAttempt
	var seq int64
	var ms int32
	err := row.Scan(&a.ID, &a.Destination, &a.MsgID, &a.Key, &a.Integration, &a.Tenant, &a.EventType, &seq, &a.Attempt,
		&a.Outcome, &a.StatusCode, &a.ErrorClass, &ms, &a.Response, &a.AttemptedAt, &a.NextAttemptAt)
	a.StreamSeq, a.Latency = uint64(seq), time.Duration(ms)*time.Millisecond
	return a, err
}

// DispatchAttemptsOf returns every attempt to deliver the event key's
// messages, to every destination, oldest first.
func (s *Store) DispatchAttemptsOf(ctx context.Context, key string) ([]DispatchAttempt, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+dispatchColumns+` FROM intake.dispatch_attempts
		WHERE key = $1 ORDER BY attempted_at, id`, key)
	if err != nil {
		return nil, fmt.Errorf("store: dispatch attempts of %s: %w", key, err)
	}
	as, err := pgx.CollectRows(rows, scanDispatchAttempt)
	if err != nil {
		return nil, fmt.Errorf("store: dispatch attempts of %s: %w", key, err)
	}
	return as, nil
}

// DestinationState is a destination's row of intake.destination_state.
type DestinationState struct {
	Destination     string
	Paused          bool
	PausedBy        string
	PausedReason    string
	PausedAt        *time.Time
	CircuitOpen     bool
	CircuitChanged  *time.Time
	CircuitInstance string
}

// DestinationStates returns every destination's state row, by name.
func (s *Store) DestinationStates(ctx context.Context) (map[string]DestinationState, error) {
	rows, err := s.pool.Query(ctx, `SELECT destination, paused, paused_by, paused_reason, paused_at,
		circuit_open, circuit_changed_at, circuit_instance FROM intake.destination_state`)
	if err != nil {
		return nil, fmt.Errorf("store: destination states: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DestinationState, error) {
		var d DestinationState
		err := row.Scan(&d.Destination, &d.Paused, &d.PausedBy, &d.PausedReason, &d.PausedAt,
			&d.CircuitOpen, &d.CircuitChanged, &d.CircuitInstance)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: destination states: %w", err)
	}
	out := make(map[string]DestinationState, len(list))
	for _, d := range list {
		out[d.Destination] = d
	}
	return out, nil
}

// SetDestinationPaused pauses (or resumes) a destination for every
// dispatcher, recording by and reason (PauseDestination).
func (s *Store) SetDestinationPaused(ctx context.Context, destination string, paused bool, by, reason string) error {
	action := DestinationResume
	if paused {
		action = DestinationPause
	}
	return s.PauseDestination(ctx, destination, action, by, reason)
}

// SetCircuit records a dispatcher's circuit breaker opening or closing for
// destination.
func (s *Store) SetCircuit(ctx context.Context, destination string, open bool, instance string) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO intake.destination_state (destination, circuit_open, circuit_changed_at, circuit_instance)
		VALUES ($1, $2, now(), $3)
		ON CONFLICT (destination) DO UPDATE SET circuit_open = $2, circuit_changed_at = now(), circuit_instance = $3`,
		destination, open, instance)
	if err != nil {
		return fmt.Errorf("store: circuit of destination %s: %w", destination, err)
	}
	return nil
}

// DispatchFilter selects delivery log rows: zero fields do not filter.
type DispatchFilter struct {
	Destination string
	Outcome     string // delivered, retry, failed
	Key         string
	Since       time.Time // attempted_at ≥ Since
	Until       time.Time // attempted_at < Until
	Limit       int       // rows per page; defaults to 100, at most 1000
	Cursor      string    // continues after the last row of a previous page
}

type dispatchCursor struct {
	ID int64 `json:"i"`
}

// ListDispatchAttempts returns a page of the delivery log, newest first,
// and the cursor of the next page ("" at the end).
func (s *Store) ListDispatchAttempts(ctx context.Context, f DispatchFilter) ([]DispatchAttempt, string, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	var before *int64
	if f.Cursor != "" {
		var c dispatchCursor
		if err := decodeCursor(f.Cursor, &c); err != nil {
			return nil, "", err
		}
		before = &c.ID
	}
	var since, until *time.Time
	if !f.Since.IsZero() {
		since = &f.Since
	}
	if !f.Until.IsZero() {
		until = &f.Until
	}
	rows, err := s.pool.Query(ctx, `SELECT `+dispatchColumns+` FROM intake.dispatch_attempts
		WHERE ($1 = '' OR destination = $1) AND ($2 = '' OR outcome = $2) AND ($3 = '' OR key = $3)
		  AND ($4::timestamptz IS NULL OR attempted_at >= $4) AND ($5::timestamptz IS NULL OR attempted_at < $5)
		  AND ($6::bigint IS NULL OR id < $6)
		ORDER BY id DESC LIMIT $7`, f.Destination, f.Outcome, f.Key, since, until, before, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("store: list dispatch attempts: %w", err)
	}
	as, err := pgx.CollectRows(rows, scanDispatchAttempt)
	if err != nil {
		return nil, "", fmt.Errorf("store: list dispatch attempts: %w", err)
	}
	next := ""
	if len(as) > limit {
		as = as[:limit]
		next = encodeCursor(dispatchCursor{ID: as[limit-1].ID})
	}
	return as, next, nil
}

// FailedDeliveries calls fn with the last attempt of each message whose
// delivery to destination failed (no later attempt delivered it) with its
// failure in [since, until) (zero: unbounded), oldest first.
func (s *Store) FailedDeliveries(ctx context.Context, destination string, since, until time.Time, fn func(DispatchAttempt) error) error {
	var from, to *time.Time
	if !since.IsZero() {
		from = &since
	}
	if !until.IsZero() {
		to = &until
	}
	rows, err := s.pool.Query(ctx, `SELECT `+dispatchColumns+` FROM intake.dispatch_attempts a
		WHERE destination = $1 AND outcome = 'failed'
		  AND ($2::timestamptz IS NULL OR attempted_at >= $2) AND ($3::timestamptz IS NULL OR attempted_at < $3)
		  AND NOT EXISTS (SELECT 1 FROM intake.dispatch_attempts b
		                  WHERE b.key = a.key AND b.destination = a.destination AND b.msg_id = a.msg_id AND b.id > a.id)
		ORDER BY id`, destination, from, to)
	if err != nil {
		return fmt.Errorf("store: failed deliveries of %s: %w", destination, err)
	}
	defer rows.Close()
	for rows.Next() {
		a, err := scanDispatchAttempt(rows)
		if err != nil {
			return fmt.Errorf("store: failed deliveries of %s: %w", destination, err)
		}
		if err := fn(a); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: failed deliveries of %s: %w", destination, err)
	}
	return nil
}

// DestinationStats is what a destination's delivery log says over a
// window.
type DestinationStats struct {
	Destination string
	Attempts    int64
	Delivered   int64
	Retried     int64 // attempts that will be tried again
	Failed      int64
	LastAt      *time.Time
	LastOutcome string
	LastStatus  int
	LastClass   string
}

// DestinationStatsSince sums each destination's attempts since since, with
// its last attempt.
func (s *Store) DestinationStatsSince(ctx context.Context, since time.Time) (map[string]DestinationStats, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT destination, count(*), count(*) FILTER (WHERE outcome = 'delivered'),
		       count(*) FILTER (WHERE outcome = 'retry'), count(*) FILTER (WHERE outcome = 'failed'),
		       max(attempted_at),
		       (array_agg(outcome ORDER BY id DESC))[1], (array_agg(coalesce(status_code, 0) ORDER BY id DESC))[1],
		       (array_agg(error_class ORDER BY id DESC))[1]
		FROM intake.dispatch_attempts WHERE attempted_at >= $1 GROUP BY destination`, since)
	if err != nil {
		return nil, fmt.Errorf("store: destination stats: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DestinationStats, error) {
		var d DestinationStats
		err := row.Scan(&d.Destination, &d.Attempts, &d.Delivered, &d.Retried, &d.Failed, &d.LastAt,
			&d.LastOutcome, &d.LastStatus, &d.LastClass)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: destination stats: %w", err)
	}
	out := make(map[string]DestinationStats, len(list))
	for _, d := range list {
		out[d.Destination] = d
	}
	return out, nil
}

// Operators' actions on a destination (intake.destination_actions).
const (
	DestinationPause  = "pause"
	DestinationResume = "resume"
)

// DestinationAction is one operator's pause or resume.
type DestinationAction struct {
	Destination string
	Action      string
	RequestedBy string
	Reason      string
	At          time.Time
}

// PauseDestination pauses (action pause) or resumes (resume) destination
// for every dispatcher and records who did it and why, in one
// transaction.
func (s *Store) PauseDestination(ctx context.Context, destination, action, by, reason string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO intake.destination_state (destination, paused, paused_by, paused_reason, paused_at)
			VALUES ($1, $2, $3, $4, now())
			ON CONFLICT (destination) DO UPDATE SET paused = $2, paused_by = $3, paused_reason = $4, paused_at = now()`,
			destination, action == DestinationPause, by, reason); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO intake.destination_actions (destination, action, requested_by, reason)
			VALUES ($1, $2, $3, $4)`, destination, action, by, reason)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: %s destination %s: %w", action, destination, err)
	}
	return nil
}

// DestinationActions returns destination's last limit actions, newest
// first.
func (s *Store) DestinationActions(ctx context.Context, destination string, limit int) ([]DestinationAction, error) {
	rows, err := s.pool.Query(ctx, `SELECT destination, action, requested_by, reason, at FROM intake.destination_actions
		WHERE destination = $1 ORDER BY id DESC LIMIT $2`, destination, limit)
	if err != nil {
		return nil, fmt.Errorf("store: actions of destination %s: %w", destination, err)
	}
	as, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DestinationAction, error) {
		var a DestinationAction
		err := row.Scan(&a.Destination, &a.Action, &a.RequestedBy, &a.Reason, &a.At)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: actions of destination %s: %w", destination, err)
	}
	return as, nil
}
