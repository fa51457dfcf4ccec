package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
)

// EventRecord is an inbox row with its conflict count, as the operator API lists
// it (the replayer encodes it as its wire type, apiclient.Event).
type EventRecord struct {
	Key             string
	Integration     string
	Account         string
	EventID         string
	Tenant          string
	EventType       string
	Status          inbox.Status
	PayloadSHA256   string
	DeliveryCount   int
	Attempts        int
	StreamSeq       int64
	FirstReceivedAt time.Time
	LastReceivedAt  time.Time
	ProcessedAt     *time.Time
	Error           *string
	Conflicts       int
	// NextAttemptAt and MaxDeliver are set for a retrying event only
	// (StatusRetrying, no inbox row: RetryingEvent, ListRetrying): when the
	// processor tries again, and of how many attempts Attempts is.
	NextAttemptAt *time.Time
	MaxDeliver    int
}

// GetEvent reads one inbox row with its conflict count. The account may be
// empty; when the caller does not know it (API by integration and event id),
// use FindEvent.
func (s *Store) GetEvent(ctx context.Context, k envelope.Key) (EventRecord, error) {
	return s.findEvent(ctx, `WHERE i.integration = $1 AND i.account = $2 AND i.event_id = $3`,
		k.Integration, k.Account, k.EventID)
}

// FindEvent reads the inbox row of an event by integration and event id.
// An integration has one account scope, or accounts from a verified header;
// when several accounts share an event id, the oldest row is returned.
func (s *Store) FindEvent(ctx context.Context, integration, eventID string) (EventRecord, error) {
	return s.findEvent(ctx, `WHERE i.integration = $1 AND i.event_id = $2`, integration, eventID)
}

// EventAtSeq is the inbox row whose event was first stored at INTAKE_IN
// sequence seq (inbox.stream_seq, indexed); ErrNotFound when none is.
func (s *Store) EventAtSeq(ctx context.Context, seq int64) (EventRecord, error) {
	return s.findEvent(ctx, `WHERE i.stream_seq = $1`, seq)
}

func (s *Store) findEvent(ctx context.Context, where string, args ...any) (EventRecord, error) {
	var e EventRecord
	err := s.pool.QueryRow(ctx, `
		SELECT i.integration, i.account, i.event_id, i.tenant, i.event_type, i.status, i.payload_sha256,
			i.delivery_count, i.attempts, i.stream_seq, i.first_received_at, i.last_received_at,
			i.processed_at, i.error,
			(SELECT count(*) FROM intake.conflicts c
			 WHERE c.integration = i.integration AND c.account = i.account AND c.event_id = i.event_id)
		FROM intake.inbox i `+where+`
		ORDER BY i.first_received_at LIMIT 1`, args...,
	).Scan(&e.Integration, &e.Account, &e.EventID, &e.Tenant, &e.EventType, &e.Status, &e.PayloadSHA256,
		&e.DeliveryCount, &e.Attempts, &e.StreamSeq, &e.FirstReceivedAt, &e.LastReceivedAt,
		&e.ProcessedAt, &e.Error, &e.Conflicts)
	if errors.Is(err, pgx.ErrNoRows) {
		return EventRecord{}, ErrNotFound
	}
	if err != nil {
		return EventRecord{}, fmt.Errorf("store: get event: %w", err)
	}
	e.Key = envelope.Key{Integration: e.Integration, Account: e.Account, EventID: e.EventID}.String()
	return e, nil
}

// EventFilter selects inbox rows for ListEvents. Zero fields do not filter.
type EventFilter struct {
	Integration string
	Tenant      string
	EventType   string
	Status      string
	// Since and Until bound first_received_at: since ≤ t < until.
	Since, Until time.Time
	// KeyPrefix matches the start of the scoped key {integration}/{account}/{event_id}.
	KeyPrefix string
	// Limit caps the page. Defaults to 100; at most 1000.
	Limit int
	// Cursor continues after the last row of a previous page (NextCursor).
	Cursor string
}

// eventCursor is the keyset position of the last row of a page: rows come
// newest first, ties broken by the key.
type eventCursor struct {
	At          time.Time `json:"t"`
	Integration string    `json:"i"`
	Account     string    `json:"a"`
	EventID     string    `json:"e"`
}

// ErrBadCursor is returned for a cursor this store did not hand out.
var ErrBadCursor = errors.New("store: invalid cursor")

// ListEvents returns one page of inbox rows, newest first, and the cursor of
// the next page ("" when this is the last).
func (s *Store) ListEvents(ctx context.Context, f EventFilter) ([]EventRecord, string, error) {
	limit := pageLimit(f.Limit)
	var w conds
	w.eq("i.integration", f.Integration)
	w.eq("i.tenant", f.Tenant)
	w.eq("i.event_type", f.EventType)
	w.eq("i.status", f.Status)
	w.between("i.first_received_at", f.Since, f.Until)
	w.keyPrefix("i.", f.KeyPrefix)
	if f.Cursor != "" {
		var c eventCursor
		if err := decodeCursor(f.Cursor, &c); err != nil {
			return nil, "", err
		}
		w.add(fmt.Sprintf("(i.first_received_at, i.integration, i.account, i.event_id) < (%s, %s, %s, %s)",
			w.arg(c.At), w.arg(c.Integration), w.arg(c.Account), w.arg(c.EventID)))
	}
	q := `SELECT ` + eventColumns + ` FROM intake.inbox i` + w.sql() +
		" ORDER BY i.first_received_at DESC, i.integration DESC, i.account DESC, i.event_id DESC LIMIT " + w.arg(limit+1)
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return nil, "", fmt.Errorf("store: list events: %w", err)
	}
	events, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, "", fmt.Errorf("store: list events: %w", err)
	}
	next := ""
	if len(events) > limit {
		events = events[:limit]
		last := events[limit-1]
		next = encodeCursor(eventCursor{At: last.FirstReceivedAt, Integration: last.Integration, Account: last.Account, EventID: last.EventID})
	}
	return events, next, nil
}

const eventColumns = `i.integration, i.account, i.event_id, i.tenant, i.event_type, i.status, i.payload_sha256,
	i.delivery_count, i.attempts, i.stream_seq, i.first_received_at, i.last_received_at,
	i.processed_at, i.error,
	(SELECT count(*) FROM intake.conflicts c
	 WHERE c.integration = i.integration AND c.account = i.account AND c.event_id = i.event_id)`

func scanEvent(row pgx.CollectableRow) (EventRecord, error) {
	var e EventRecord
	err := row.Scan(&e.Integration, &e.Account, &e.EventID, &e.Tenant, &e.EventType, &e.Status, &e.PayloadSHA256,
		&e.DeliveryCount, &e.Attempts, &e.StreamSeq, &e.FirstReceivedAt, &e.LastReceivedAt,
		&e.ProcessedAt, &e.Error, &e.Conflicts)
	e.Key = envelope.Key{Integration: e.Integration, Account: e.Account, EventID: e.EventID}.String()
	return e, err
}

func pageLimit(n int) int {
	switch {
	case n <= 0:
		return 100
	case n > 1000:
		return 1000
	}
	return n
}

func encodeCursor(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return ErrBadCursor
	}
	if err := json.Unmarshal(b, v); err != nil {
		return ErrBadCursor
	}
	return nil
}

// Conflict is a same-key-other-payload delivery: both hashes, both stream
// sequences, when it arrived and when the processor saw it.
type Conflict struct {
	ID                   int64
	Key                  string
	Integration          string
	Account              string
	EventID              string
	Tenant               string
	OriginalSHA256       string
	ConflictingSHA256    string
	OriginalStreamSeq    int64
	ConflictingStreamSeq int64
	ReceivedAt           time.Time
	DetectedAt           time.Time
}

// ConflictFilter selects conflicts for ListConflicts. Zero fields do not filter.
type ConflictFilter struct {
	Integration string
	Tenant      string
	// Since and Until bound detected_at: since ≤ t < until.
	Since, Until time.Time
	KeyPrefix    string
	// Limit caps the page. Defaults to 100; at most 1000.
	Limit  int
	Cursor string
}

// ListConflicts returns one page of conflicts, newest first, and the cursor
// of the next page ("" when this is the last).
func (s *Store) ListConflicts(ctx context.Context, f ConflictFilter) ([]Conflict, string, error) {
	limit := pageLimit(f.Limit)
	var w conds
	w.eq("integration", f.Integration)
	w.eq("tenant", f.Tenant)
	w.between("detected_at", f.Since, f.Until)
	w.keyPrefix("", f.KeyPrefix)
	if f.Cursor != "" {
		var id int64
		if err := decodeCursor(f.Cursor, &id); err != nil {
			return nil, "", err
		}
		w.add("id < " + w.arg(id))
	}
	q := `SELECT ` + conflictColumns + ` FROM intake.conflicts` + w.sql() + " ORDER BY id DESC LIMIT " + w.arg(limit+1)
	out, err := s.queryConflicts(ctx, q, w.args...)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = encodeCursor(out[limit-1].ID)
	}
	return out, next, nil
}

// EventConflicts lists the conflicts of one event, oldest first.
func (s *Store) EventConflicts(ctx context.Context, k envelope.Key) ([]Conflict, error) {
	return s.queryConflicts(ctx, `SELECT `+conflictColumns+` FROM intake.conflicts
		WHERE integration = $1 AND account = $2 AND event_id = $3 ORDER BY id`, k.Integration, k.Account, k.EventID)
}

const conflictColumns = `id, integration, account, event_id, tenant, original_sha256, conflicting_sha256,
	original_stream_seq, conflicting_stream_seq, received_at, detected_at`

func (s *Store) queryConflicts(ctx context.Context, q string, args ...any) ([]Conflict, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: conflicts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Conflict, error) {
		var c Conflict
		err := row.Scan(&c.ID, &c.Integration, &c.Account, &c.EventID, &c.Tenant, &c.OriginalSHA256, &c.ConflictingSHA256,
			&c.OriginalStreamSeq, &c.ConflictingStreamSeq, &c.ReceivedAt, &c.DetectedAt)
		c.Key = envelope.Key{Integration: c.Integration, Account: c.Account, EventID: c.EventID}.String()
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: conflicts: %w", err)
	}
	return out, nil
}

// EventDeliveryHistory lists the delivery history of one event, oldest first.
func (s *Store) EventDeliveryHistory(ctx context.Context, k envelope.Key) ([]DeliveryRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT receipt_id, received_at, instance, status_code, answer, retry_hints
		FROM intake.deliveries WHERE integration = $1 AND account = $2 AND event_id = $3
		ORDER BY received_at, receipt_id`, k.Integration, k.Account, k.EventID)
	if err != nil {
		return nil, fmt.Errorf("store: deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DeliveryRecord, error) {
		var d DeliveryRecord
		err := row.Scan(&d.ReceiptID, &d.ReceivedAt, &d.Instance, &d.StatusCode, &d.Answer, &d.RetryHints)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: deliveries: %w", err)
	}
	return out, nil
}

// ExecutionRecord is one handler run of an event, as the operator API
// lists it.
type ExecutionRecord struct {
	ID         string
	Mode       string
	ReplayID   *string
	StreamSeq  int64
	ExecutedAt time.Time
}

// EventExecutions lists the handler runs of one event, oldest first.
func (s *Store) EventExecutions(ctx context.Context, k envelope.Key) ([]ExecutionRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT id::text, mode, replay_id, stream_seq, executed_at
		FROM intake.executions WHERE integration = $1 AND account = $2 AND event_id = $3
		ORDER BY executed_at, id`, k.Integration, k.Account, k.EventID)
	if err != nil {
		return nil, fmt.Errorf("store: executions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ExecutionRecord, error) {
		var e ExecutionRecord
		err := row.Scan(&e.ID, &e.Mode, &e.ReplayID, &e.StreamSeq, &e.ExecutedAt)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: executions: %w", err)
	}
	return out, nil
}
