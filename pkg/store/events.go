package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
)

// Event is an inbox row as the operator API shows it.
type Event struct {
	Key             string     `json:"key"`
	Integration     string     `json:"integration"`
	Account         string     `json:"account"`
	EventID         string     `json:"event_id"`
	Tenant          string     `json:"tenant"`
	EventType       string     `json:"event_type"`
	Status          string     `json:"status"`
	PayloadSHA256   string     `json:"payload_sha256"`
	DeliveryCount   int        `json:"delivery_count"`
	Attempts        int        `json:"attempts"`
	StreamSeq       int64      `json:"stream_seq"`
	FirstReceivedAt time.Time  `json:"first_received_at"`
	LastReceivedAt  time.Time  `json:"last_received_at"`
	ProcessedAt     *time.Time `json:"processed_at"`
	Error           *string    `json:"error"`
	Conflicts       int        `json:"conflicts"`
}

// GetEvent reads one inbox row with its conflict count. The account may be
// empty; when the caller does not know it (API by integration and event id),
// use FindEvent.
func (s *Store) GetEvent(ctx context.Context, k envelope.Key) (Event, error) {
	return s.findEvent(ctx, `WHERE i.integration = $1 AND i.account = $2 AND i.event_id = $3`,
		k.Integration, k.Account, k.EventID)
}

// FindEvent reads the inbox row of an event by integration and event id.
// An integration has one account scope, or accounts from a verified header;
// when several accounts share an event id, the oldest row is returned.
func (s *Store) FindEvent(ctx context.Context, integration, eventID string) (Event, error) {
	return s.findEvent(ctx, `WHERE i.integration = $1 AND i.event_id = $2`, integration, eventID)
}

func (s *Store) findEvent(ctx context.Context, where string, args ...any) (Event, error) {
	var e Event
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
		return Event{}, ErrNotFound
	}
	if err != nil {
		return Event{}, fmt.Errorf("store: get event: %w", err)
	}
	e.Key = envelope.Key{Integration: e.Integration, Account: e.Account, EventID: e.EventID}.String()
	return e, nil
}
