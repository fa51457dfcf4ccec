package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/internal/cut"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
)

// StatusRetrying is the status the API and the console give an event that
// has no inbox row yet but failed handler attempts, the last with a next
// attempt due: it is waiting out its backoff. It is never an inbox status
// (a row there is a committed decision), only read from
// intake.handler_attempts.
const StatusRetrying inbox.Status = "retrying"

// maxAttemptError bounds an attempt's recorded error text.
const maxAttemptError = 2048

// Attempt is one failed handler run of an event (intake.handler_attempts).
type Attempt struct {
	Key           envelope.Key
	Tenant        string
	EventType     string
	PayloadSHA256 string
	StreamSeq     int64
	Delivery      int // JetStream's delivery count of the message: attempt n
	MaxDeliver    int // processor.max_deliver when it ran
	Handler       string
	ErrorClass    string // permanent, quarantine, timeout, sql <SQLSTATE>, error
	Error         string
	ReceivedAt    time.Time
	FailedAt      time.Time
	NextAttemptAt *time.Time // nil: the last attempt, the event recorded failed or quarantined
}

// RecordAttempt stores a; a second record of the same delivery of the
// same message (a processor that crashed after writing it) is ignored.
func (s *Store) RecordAttempt(ctx context.Context, a Attempt) error {
	msg := a.Error
	if len(msg) > maxAttemptError {
		msg = cut.UTF8(msg, maxAttemptError)
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO intake.handler_attempts (integration, account, event_id, tenant, event_type, payload_sha256,
			stream_seq, delivery, max_deliver, handler, error_class, error, received_at, next_attempt_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
		ON CONFLICT (integration, account, event_id, stream_seq, delivery) DO NOTHING`,
		a.Key.Integration, a.Key.Account, a.Key.EventID, a.Tenant, a.EventType, a.PayloadSHA256,
		a.StreamSeq, a.Delivery, a.MaxDeliver, a.Handler, a.ErrorClass, msg, a.ReceivedAt, a.NextAttemptAt)
	if err != nil {
		return fmt.Errorf("store: record attempt %s: %w", a.Key, err)
	}
	return nil
}

const attemptColumns = `integration, account, event_id, tenant, event_type, payload_sha256, stream_seq, delivery,
	max_deliver, handler, error_class, error, received_at, failed_at, next_attempt_at`

func scanAttempt(row pgx.CollectableRow) (Attempt, error) {
	var a Attempt
	err := row.Scan(&a.Key.Integration, &a.Key.Account, &a.Key.EventID, &a.Tenant, &a.EventType, &a.PayloadSHA256,
		&a.StreamSeq, &a.Delivery, &a.MaxDeliver, &a.Handler, &a.ErrorClass, &a.Error, &a.ReceivedAt, &a.FailedAt,
		&a.NextAttemptAt)
	return a, err
}

// EventAttempts are k's failed handler attempts, oldest first.
func (s *Store) EventAttempts(ctx context.Context, k envelope.Key) ([]Attempt, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+attemptColumns+` FROM intake.handler_attempts
		WHERE integration = $1 AND account = $2 AND event_id = $3 ORDER BY failed_at, id`,
		k.Integration, k.Account, k.EventID)
	if err != nil {
		return nil, fmt.Errorf("store: event attempts: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanAttempt)
	if err != nil {
		return nil, fmt.Errorf("store: event attempts: %w", err)
	}
	return list, nil
}

// retryingColumns read the latest attempt a of an event as an EventRecord
// (scanRetrying), with the event's first delivery time over all attempts.
const retryingColumns = `a.integration, a.account, a.event_id, a.tenant, a.event_type, a.payload_sha256, a.stream_seq,
	a.delivery, a.max_deliver, a.error, a.received_at, a.next_attempt_at,
	(SELECT min(f.received_at) FROM intake.handler_attempts f
	 WHERE f.integration = a.integration AND f.account = a.account AND f.event_id = a.event_id),
	a.failed_at, a.id`

// latestWithoutInbox keeps attempt a if it is its event's latest and the
// inbox has not decided the event.
const latestWithoutInbox = `NOT EXISTS (SELECT 1 FROM intake.handler_attempts l
		WHERE l.integration = a.integration AND l.account = a.account AND l.event_id = a.event_id
		  AND (l.failed_at, l.id) > (a.failed_at, a.id))
	AND NOT EXISTS (SELECT 1 FROM intake.inbox i
		WHERE i.integration = a.integration AND i.account = a.account AND i.event_id = a.event_id)`

// retryingRow is an EventRecord read by retryingColumns and the latest
// attempt's position (for a page's cursor).
type retryingRow struct {
	EventRecord
	failedAt time.Time
	id       int64
}

func scanRetrying(row pgx.CollectableRow) (retryingRow, error) {
	var r retryingRow
	e := &r.EventRecord
	var msg string
	err := row.Scan(&e.Integration, &e.Account, &e.EventID, &e.Tenant, &e.EventType, &e.PayloadSHA256, &e.StreamSeq,
		&e.Attempts, &e.MaxDeliver, &msg, &e.LastReceivedAt, &e.NextAttemptAt, &e.FirstReceivedAt, &r.failedAt, &r.id)
	e.Error = &msg
	e.Status = StatusRetrying
	e.Key = envelope.Key{Integration: e.Integration, Account: e.Account, EventID: e.EventID}.String()
	return r, err
}

// RetryingEvent is the event of k (account "" when unknown: the first
// found in any account) that has failed attempts, the latest with a next
// attempt due, and no inbox row: an EventRecord with Status StatusRetrying,
// Attempts the latest attempt's number of MaxDeliver, its error and
// NextAttemptAt. ErrNotFound when there is none (no attempts, the last
// attempt recorded, or the inbox has decided).
func (s *Store) RetryingEvent(ctx context.Context, k envelope.Key) (EventRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+retryingColumns+` FROM intake.handler_attempts a
		WHERE a.integration = $1 AND ($2 = '' OR a.account = $2) AND a.event_id = $3
		  AND a.next_attempt_at IS NOT NULL AND `+latestWithoutInbox+`
		ORDER BY a.failed_at DESC, a.id DESC LIMIT 1`, k.Integration, k.Account, k.EventID)
	if err != nil {
		return EventRecord{}, fmt.Errorf("store: retrying event: %w", err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRetrying)
	if errors.Is(err, pgx.ErrNoRows) {
		return EventRecord{}, ErrNotFound
	}
	if err != nil {
		return EventRecord{}, fmt.Errorf("store: retrying event: %w", err)
	}
	return r.EventRecord, nil
}

// attemptCursor is the keyset position of a retrying page's last row.
type attemptCursor struct {
	At time.Time `json:"t"`
	ID int64     `json:"id"`
}

// ListRetrying is ListEvents for status retrying: the events waiting for
// their next attempt (RetryingEvent's), newest failure first, filtered by
// integration, tenant, type, key prefix and the first attempt's delivery
// time (since/until bound the latest attempt's received_at).
func (s *Store) ListRetrying(ctx context.Context, f EventFilter) ([]EventRecord, string, error) {
	limit := pageLimit(f.Limit)
	var w conds
	w.add("a.next_attempt_at IS NOT NULL")
	w.eq("a.integration", f.Integration)
	w.eq("a.tenant", f.Tenant)
	w.eq("a.event_type", f.EventType)
	w.between("a.received_at", f.Since, f.Until)
	w.keyPrefix("a.", f.KeyPrefix)
	if f.Cursor != "" {
		var c attemptCursor
		if err := decodeCursor(f.Cursor, &c); err != nil {
			return nil, "", err
		}
		w.add(fmt.Sprintf("(a.failed_at, a.id) < (%s, %s)", w.arg(c.At), w.arg(c.ID)))
	}
	w.add(latestWithoutInbox)
	rows, err := s.pool.Query(ctx, `SELECT `+retryingColumns+` FROM intake.handler_attempts a`+w.sql()+
		` ORDER BY a.failed_at DESC, a.id DESC LIMIT `+w.arg(limit+1), w.args...)
	if err != nil {
		return nil, "", fmt.Errorf("store: list retrying: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanRetrying)
	if err != nil {
		return nil, "", fmt.Errorf("store: list retrying: %w", err)
	}
	next := ""
	if len(list) > limit {
		list = list[:limit]
		last := list[limit-1]
		next = encodeCursor(attemptCursor{At: last.failedAt, ID: last.id})
	}
	out := make([]EventRecord, len(list))
	for i, r := range list {
		out[i] = r.EventRecord
	}
	return out, next, nil
}

// RetryingCounts are the events waiting for their next attempt, by
// integration (the overview's "retrying").
func (s *Store) RetryingCounts(ctx context.Context) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT a.integration, count(*) FROM intake.handler_attempts a
		WHERE a.next_attempt_at IS NOT NULL AND `+latestWithoutInbox+` GROUP BY a.integration`)
	if err != nil {
		return nil, fmt.Errorf("store: retrying counts: %w", err)
	}
	out := map[string]int{}
	var in string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&in, &n}, func() error { out[in] = n; return nil })
	if err != nil {
		return nil, fmt.Errorf("store: retrying counts: %w", err)
	}
	return out, nil
}
