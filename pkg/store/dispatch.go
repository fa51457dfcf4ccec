package store

import (
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

// RecordDispatchAttempts writes the attempts in one statement.
func (s *Store) RecordDispatchAttempts(ctx context.Context, as []DispatchAttempt) error {
	if len(as) == 0 {
		return nil
	}
	n := len(as)
	dest, msg, key, integ, tenant, typ := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	seq, attempt, code, latency := make([]int64, n), make([]int32, n), make([]*int32, n), make([]int32, n)
	outcome, class, resp := make([]string, n), make([]string, n), make([]string, n)
	at, next := make([]time.Time, n), make([]*time.Time, n)
	for i, a := range as {
		dest[i], msg[i], key[i], integ[i], tenant[i], typ[i] = a.Destination, a.MsgID, a.Key, a.Integration, a.Tenant, a.EventType
		seq[i], attempt[i], latency[i] = int64(a.StreamSeq), int32(a.Attempt), int32(min(a.Latency.Milliseconds(), 1<<31-1))
		if a.StatusCode != 0 {
			c := int32(a.StatusCode)
			code[i] = &c
		}
		outcome[i], class[i] = a.Outcome, a.ErrorClass
		resp[i] = a.Response
		if len(resp[i]) > MaxDispatchResponse {
			resp[i] = truncateUTF8(resp[i], MaxDispatchResponse)
		}
		at[i], next[i] = a.AttemptedAt, a.NextAttemptAt
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO intake.dispatch_attempts (destination, msg_id, key, integration, tenant, event_type, stream_seq,
			attempt, outcome, status_code, error_class, latency_ms, response, attempted_at, next_attempt_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[],
			$8::int[], $9::text[], $10::int[], $11::text[], $12::int[], $13::text[], $14::timestamptz[], $15::timestamptz[])`,
		dest, msg, key, integ, tenant, typ, seq, attempt, outcome, code, class, latency, resp, at, next)
	if err != nil {
		return fmt.Errorf("store: record dispatch attempts: %w", err)
	}
	return nil
}

const dispatchColumns = `destination, msg_id, key, integration, tenant, event_type, stream_seq, attempt, outcome,
	coalesce(status_code, 0), error_class, latency_ms, response, attempted_at, next_attempt_at`

func scanDispatchAttempt(row pgx.CollectableRow) (DispatchAttempt, error) {
	var a DispatchAttempt
	var seq int64
	var ms int32
	err := row.Scan(&a.Destination, &a.MsgID, &a.Key, &a.Integration, &a.Tenant, &a.EventType, &seq, &a.Attempt,
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
// dispatcher; by and reason are the operator's.
func (s *Store) SetDestinationPaused(ctx context.Context, destination string, paused bool, by, reason string) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO intake.destination_state (destination, paused, paused_by, paused_reason, paused_at)
		VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (destination) DO UPDATE SET paused = $2, paused_by = $3, paused_reason = $4, paused_at = now()`,
		destination, paused, by, reason)
	if err != nil {
		return fmt.Errorf("store: pause destination %s: %w", destination, err)
	}
	return nil
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
