package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
)

// The replayer's reads: which inbox rows a selector matches, what the inbox
// says about keys found in the stream, which outbox rows to redeliver.

// InboxState is what the replayer needs of an inbox row to predict a replay.
type InboxState struct {
	Key           envelope.Key
	Tenant        string
	EventType     string
	Status        inbox.Status
	PayloadSHA256 string
	StreamSeq     uint64
}

// keyChunk bounds the keys one statement sends as arrays.
const keyChunk = 5000

// keyColumns splits keys into the three text arrays a statement unnests as
// (integration, account, event_id).
func keyColumns(keys []envelope.Key) (integ, acct, id []string) {
	integ, acct, id = make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		integ[i], acct[i], id[i] = k.Integration, k.Account, k.EventID
	}
	return integ, acct, id
}

// LookupInbox returns the inbox rows of keys that have one.
func (s *Store) LookupInbox(ctx context.Context, keys []envelope.Key) (map[envelope.Key]InboxState, error) {
	out := make(map[envelope.Key]InboxState, len(keys))
	for start := 0; start < len(keys); start += keyChunk {
		integ, acct, id := keyColumns(keys[start:min(start+keyChunk, len(keys))])
		rows, err := s.pool.Query(ctx, `
			SELECT `+inboxStateColumns+` FROM intake.inbox i
			JOIN unnest($1::text[], $2::text[], $3::text[]) AS t(integration, account, event_id)
			  USING (integration, account, event_id)`, integ, acct, id)
		if err != nil {
			return nil, fmt.Errorf("store: lookup inbox: %w", err)
		}
		err = forEachInboxState(rows, func(st InboxState) error {
			out[st.Key] = st
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("store: lookup inbox: %w", err)
		}
	}
	return out, nil
}

// InboxSelector selects inbox rows; zero fields do not filter.
type InboxSelector struct {
	Integration string
	Tenant      string
	EventType   string
	Status      string
	// Limit stops the selection after this many rows (0: no limit).
	Limit int
}

// SelectInbox calls fn for every inbox row sel matches, in stream order.
func (s *Store) SelectInbox(ctx context.Context, sel InboxSelector, fn func(InboxState) error) error {
	var w conds
	w.eq("integration", sel.Integration)
	w.eq("tenant", sel.Tenant)
	w.eq("event_type", sel.EventType)
	w.eq("status", sel.Status)
	q := `SELECT ` + inboxStateColumns + ` FROM intake.inbox i` + w.sql() + " ORDER BY stream_seq, integration, account, event_id"
	if sel.Limit > 0 {
		q += " LIMIT " + w.arg(sel.Limit)
	}
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return fmt.Errorf("store: select inbox: %w", err)
	}
	if err := forEachInboxState(rows, fn); err != nil {
		return fmt.Errorf("store: select inbox: %w", err)
	}
	return nil
}

const inboxStateColumns = `i.integration, i.account, i.event_id, i.tenant, i.event_type, i.status, i.payload_sha256, i.stream_seq`

func forEachInboxState(rows pgx.Rows, fn func(InboxState) error) error {
	var st InboxState
	var seq int64
	_, err := pgx.ForEachRow(rows, []any{&st.Key.Integration, &st.Key.Account, &st.Key.EventID, &st.Tenant,
		&st.EventType, &st.Status, &st.PayloadSHA256, &seq}, func() error {
		st.StreamSeq = uint64(seq)
		return fn(st)
	})
	return err
}

// OutboxSelector selects published outbox rows for a redelivery; zero
// fields do not filter.
type OutboxSelector struct {
	Keys        []envelope.Key
	Integration string
	Tenant      string // the Intake-Tenant header of the row
	EventType   string // the Intake-Event-Type header of the row
	// Since and Until bound created_at: since ≤ t < until.
	Since, Until time.Time
	// Limit stops the selection after this many rows (0: no limit).
	Limit int
}

// OutboxRef is an outbox row without its payload.
type OutboxRef struct {
	ID        string
	MsgID     string // its Nats-Msg-Id on INTAKE_OUT (OutboxRow.NatsMsgID)
	Key       envelope.Key
	Tenant    string
	EventType string
	Subject   string
}

// SelectPublishedOutbox calls fn for every published outbox row sel
// matches, in commit order. Rows not yet published are left to the relay.
func (s *Store) SelectPublishedOutbox(ctx context.Context, sel OutboxSelector, fn func(OutboxRef) error) error {
	var w conds
	w.add("NOT EXISTS (SELECT 1 FROM intake.outbox_pending p WHERE p.id = outbox.id)")
	if len(sel.Keys) > 0 {
		keys := make([]string, len(sel.Keys))
		for i, k := range sel.Keys {
			keys[i] = k.String()
		}
		w.add("(integration || '/' || account || '/' || event_id) = ANY(" + w.arg(keys) + ")")
	}
	w.eq("integration", sel.Integration)
	w.eq("headers->'"+envelope.HeaderTenant+"'->>0", sel.Tenant)
	w.eq("headers->'"+envelope.HeaderEventType+"'->>0", sel.EventType)
	w.between("created_at", sel.Since, sel.Until)
	q := `SELECT id::text, coalesce(msg_id, id::text), integration, account, event_id, coalesce(headers->'` + envelope.HeaderTenant + `'->>0, ''),
		coalesce(headers->'` + envelope.HeaderEventType + `'->>0, ''), subject
		FROM intake.outbox` + w.sql() + ` ORDER BY seq`
	if sel.Limit > 0 {
		q += " LIMIT " + w.arg(sel.Limit)
	}
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return fmt.Errorf("store: select outbox: %w", err)
	}
	var r OutboxRef
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.MsgID, &r.Key.Integration, &r.Key.Account, &r.Key.EventID, &r.Tenant, &r.EventType, &r.Subject},
		func() error { return fn(r) })
	if err != nil {
		return fmt.Errorf("store: select outbox: %w", err)
	}
	return nil
}

// GetOutboxRow reads one outbox row with its payload (nil with
// PayloadSeq set: the payload is INTAKE_IN's); ErrNotFound if it is gone.
func (s *Store) GetOutboxRow(ctx context.Context, id string) (OutboxRow, error) {
	var r OutboxRow
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT id::text, coalesce(msg_id, id::text), integration, account, event_id, subject, headers, payload,
		coalesce(payload_seq, 0), created_at
		FROM intake.outbox WHERE id = $1`, id).Scan(&r.ID, &r.MsgID, &r.Key.Integration, &r.Key.Account, &r.Key.EventID,
		&r.Subject, &r.Headers, &r.Payload, &seq, &r.Created)
	if errors.Is(err, pgx.ErrNoRows) {
		return OutboxRow{}, ErrNotFound
	}
	if err != nil {
		return OutboxRow{}, fmt.Errorf("store: get outbox row: %w", err)
	}
	r.PayloadSeq = uint64(seq)
	r.restoreKeyHeaders()
	return r, nil
}

// MaxInboxStreamSeq is the highest INTAKE_IN sequence an inbox row records
// (0 for an empty inbox), read through inbox_stream_seq_idx.
func (s *Store) MaxInboxStreamSeq(ctx context.Context) (uint64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(stream_seq), 0) FROM intake.inbox`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: max inbox stream seq: %w", err)
	}
	return uint64(n), nil
}
