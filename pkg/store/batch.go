package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
)

// BatchClaim is the inbox side of one message in a group-commit batch.
type BatchClaim struct {
	Claim
	ObjectID      string // "" when the integration has no ordering
	ObjectVersion int64
}

// ClaimBatch claims every message's inbox row in ONE statement (unnest +
// INSERT … ON CONFLICT DO NOTHING), in key order so that two processors
// lock rows in the same order and cannot deadlock. It returns which claims
// inserted their row (by index) and, for the keys that already had one, the
// existing row, locked FOR UPDATE until the transaction ends. When a key
// appears twice in claims, the lower stream sequence inserts and the other
// sees it as existing.
func ClaimBatch(ctx context.Context, tx pgx.Tx, claims []BatchClaim) (inserted []bool, existing map[envelope.Key]inbox.Row, err error) {
	won, err := insertClaims(ctx, tx, claimColumnsOf(claims))
	if err != nil {
		return nil, nil, err
	}
	inserted, others := winners(claims, won)
	existing, err = lockExisting(ctx, tx, others)
	if err != nil {
		return nil, nil, err
	}
	return inserted, existing, nil
}

// claimColumns are a batch's claims as the columns unnest reads, and their
// scoped keys as the key locks take them.
type claimColumns struct {
	integ, acct, evID, tenant, typ, sha []string
	objID                               []*string
	recv                                []time.Time
	seq                                 []int64
	objVer                              []*int64
	keys                                []string
}

func claimColumnsOf(claims []BatchClaim) claimColumns {
	n := len(claims)
	c := claimColumns{
		integ: make([]string, n), acct: make([]string, n), evID: make([]string, n), tenant: make([]string, n),
		typ: make([]string, n), sha: make([]string, n), objID: make([]*string, n),
		recv: make([]time.Time, n), seq: make([]int64, n), objVer: make([]*int64, n), keys: make([]string, n),
	}
	for i, cl := range claims {
		c.integ[i], c.acct[i], c.evID[i], c.keys[i] = cl.Key.Integration, cl.Key.Account, cl.Key.EventID, cl.Key.String()
		c.tenant[i], c.typ[i], c.sha[i], c.recv[i], c.seq[i] = cl.Tenant, cl.EventType, cl.PayloadSHA256, cl.ReceivedAt, int64(cl.StreamSeq)
		if cl.ObjectID != "" {
			c.objID[i], c.objVer[i] = &claims[i].ObjectID, &claims[i].ObjectVersion
		}
	}
	return c
}

// insertClaims takes the key locks and inserts the rows of the keys that
// have none, in one round trip; it returns the stream sequence that won
// each inserted key.
//
// A new row counts its own delivery (whose history row the batch writes,
// BatchWrites.FirstDeliveries) plus any the history already holds:
// receipts of stream-stopped copies folded before the claim. The key
// locks keep a fold from slipping in between.
func insertClaims(ctx context.Context, tx pgx.Tx, c claimColumns) (map[envelope.Key]int64, error) {
	b := &pgx.Batch{}
	b.Queue(lockKeysSQL, c.keys)
	b.Queue(`
		INSERT INTO intake.inbox (integration, account, event_id, tenant, event_type, payload_sha256, status,
			first_received_at, last_received_at, processed_at, stream_seq, object_id, object_version, delivery_count)
		SELECT t.integration, t.account, t.event_id, t.tenant, t.event_type, t.sha, 'processed', t.recv,
			greatest(t.recv, h.last), now(), t.seq, t.obj_id, t.obj_ver, 1 + h.n
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[],
			$8::bigint[], $9::text[], $10::bigint[])
			AS t(integration, account, event_id, tenant, event_type, sha, recv, seq, obj_id, obj_ver)
		CROSS JOIN LATERAL (
			SELECT count(*) AS n, max(d.received_at) AS last FROM intake.deliveries d
			WHERE d.integration = t.integration AND d.account = t.account AND d.event_id = t.event_id
			  AND d.receipt_id <> 'in:' || t.seq -- its own (envelope.StreamReceiptID), were a deleted row claimed again
		) h
		ORDER BY t.integration, t.account, t.event_id, t.seq
		ON CONFLICT (integration, account, event_id) DO NOTHING
		RETURNING integration, account, event_id, stream_seq`,
		c.integ, c.acct, c.evID, c.tenant, c.typ, c.sha, c.recv, c.seq, c.objID, c.objVer)
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, fmt.Errorf("store: lock keys: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, fmt.Errorf("store: claim batch: %w", err)
	}
	won := map[envelope.Key]int64{}
	var k envelope.Key
	var s int64
	_, err = pgx.ForEachRow(rows, []any{&k.Integration, &k.Account, &k.EventID, &s}, func() error {
		won[k] = s
		return nil
	})
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("store: claim batch: %w", err)
	}
	return won, nil
}

// winners marks the claims that inserted their row (the winning sequence
// of their key, once) and returns the keys of the others.
func winners(claims []BatchClaim, won map[envelope.Key]int64) ([]bool, []envelope.Key) {
	inserted := make([]bool, len(claims))
	var others []envelope.Key
	for i, c := range claims {
		if s, ok := won[c.Key]; ok && s == int64(c.StreamSeq) {
			inserted[i] = true
			// A second copy of the same stream message (a redelivery that
			// landed next to the original) finds the row as existing.
			delete(won, c.Key)
			continue
		}
		others = append(others, c.Key)
	}
	return inserted, others
}

// lockExisting reads the inbox rows of keys, locked FOR UPDATE in key order.
func lockExisting(ctx context.Context, tx pgx.Tx, keys []envelope.Key) (map[envelope.Key]inbox.Row, error) {
	existing := map[envelope.Key]inbox.Row{}
	if len(keys) == 0 {
		return existing, nil
	}
	integ, acct, evID := keyColumns(keys)
	rows, err := tx.Query(ctx, `
		SELECT i.integration, i.account, i.event_id, i.payload_sha256, i.stream_seq, i.status
		FROM intake.inbox i
		JOIN unnest($1::text[], $2::text[], $3::text[]) AS t(integration, account, event_id)
		  USING (integration, account, event_id)
		ORDER BY 1, 2, 3
		FOR UPDATE OF i`, integ, acct, evID)
	if err != nil {
		return nil, fmt.Errorf("store: read inbox rows: %w", err)
	}
	var k envelope.Key
	var s int64
	var r inbox.Row
	_, err = pgx.ForEachRow(rows, []any{&k.Integration, &k.Account, &k.EventID, &r.PayloadSHA256, &s, &r.Status}, func() error {
		r.StreamSeq = uint64(s)
		existing[k] = r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: read inbox rows: %w", err)
	}
	return existing, nil
}

// GuardVersion advances the object's stored version to version unless a
// newer one is stored, and reports whether the event may apply. Equal
// versions apply: second-granularity timestamps (Stripe's created) collide
// for distinct events, and refusing ties would drop real changes.
func GuardVersion(ctx context.Context, tx pgx.Tx, k envelope.Key, objectID string, version int64) (bool, error) {
	var ok bool
	err := tx.QueryRow(ctx, `
		INSERT INTO intake.object_versions AS o (integration, account, object_id, version, event_id)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (integration, account, object_id) DO UPDATE
		SET version = EXCLUDED.version, event_id = EXCLUDED.event_id, updated_at = now()
		WHERE o.version <= EXCLUDED.version
		RETURNING true`, k.Integration, k.Account, objectID, version, k.EventID).Scan(&ok)
	if err == pgx.ErrNoRows {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: object version %s/%s: %w", k.Integration, objectID, err)
	}
	return true, nil
}

// Execution is one run of a handler for an event.
type Execution struct {
	ID        string
	Key       envelope.Key
	Mode      inbox.Mode
	ReplayID  string
	StreamSeq uint64
}

// ConflictRow is a same-key-other-payload message.
type ConflictRow struct {
	Claim
	Original inbox.Row
}

// BatchWrites are the rows a batch writes besides the claims; Flush sends
// them in one round trip.
type BatchWrites struct {
	Outbox     []OutboxRow
	Executions []Execution
	Conflicts  []ConflictRow
	Settled    []envelope.Key // failed/quarantined rows a replay applied: now processed
	Stale      []envelope.Key // rows claimed in this batch whose version lost
	// Rejections are the batch's messages refused before the inbox
	// decision (see CheckReplayCopies and the processor's envelope checks).
	Rejections []Rejection
	// FirstDeliveries are the history rows of the messages that claimed
	// their inbox row in this batch: the claim counted them, so their keys
	// need no recount.
	FirstDeliveries []DeliveryRecord
	// Deliveries are the other accepted deliveries entering the history
	// from their stream message (copies past the duplicate window; a
	// redelivered one is already there); their keys' delivery_count is
	// recounted.
	Deliveries []DeliveryRecord
	// Queued are statements handlers queued (Event.Queue); they go first,
	// in the same round trip.
	Queued []*pgx.QueuedQuery
}

// Flush writes w inside tx.
func (w *BatchWrites) Flush(ctx context.Context, tx pgx.Tx) error {
	b := &pgx.Batch{QueuedQueries: w.Queued}
	if n := len(w.Executions); n > 0 {
		ids, integ, acct, evID, mode := make([][16]byte, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		replay, seq := make([]*string, n), make([]int64, n)
		for i, e := range w.Executions {
			id, err := uuid.Parse(e.ID)
			if err != nil {
				return fmt.Errorf("store: execution id %q: %w", e.ID, err)
			}
			ids[i], integ[i], acct[i], evID[i], mode[i], seq[i] = id, e.Key.Integration, e.Key.Account, e.Key.EventID, string(e.Mode), int64(e.StreamSeq)
			if e.ReplayID != "" {
				replay[i] = &w.Executions[i].ReplayID
			}
		}
		b.Queue(`INSERT INTO intake.executions (id, integration, account, event_id, mode, replay_id, stream_seq)
			SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[])`,
			ids, integ, acct, evID, mode, replay, seq)
	}
	for _, c := range w.Conflicts {
		queueConflict(b, c)
	}
	if len(w.Rejections) > 0 {
		queueRejections(b, w.Rejections)
	}
	for _, k := range w.Settled {
		b.Queue(`UPDATE intake.inbox SET status = 'processed', attempts = attempts + 1, error = NULL, processed_at = now()
			WHERE integration = $1 AND account = $2 AND event_id = $3`, k.Integration, k.Account, k.EventID)
	}
	for _, k := range w.Stale {
		b.Queue(`UPDATE intake.inbox SET status = 'stale', processed_at = now()
			WHERE integration = $1 AND account = $2 AND event_id = $3`, k.Integration, k.Account, k.EventID)
	}
	var outboxIDs [][16]byte // the rows' ids as COPY sends them
	if n := len(w.Outbox); n > 0 {
		// The rows go by COPY below; their ids join the relay's pending list
		// in this round trip.
		outboxIDs = make([][16]byte, n)
		for i := range w.Outbox {
			r := &w.Outbox[i]
			if r.ID == "" {
				u := newUUID()
				r.ID, outboxIDs[i] = u.String(), u
			} else {
				u, err := uuid.Parse(r.ID)
				if err != nil {
					return fmt.Errorf("store: outbox row id %q: %w", r.ID, err)
				}
				outboxIDs[i] = u
			}
		}
		// Aged from now, not from the transaction's start: the relay's
		// outbox.relay_after counts from (nearly) the commit.
		b.Queue(`INSERT INTO intake.outbox_pending (id, created_at) SELECT unnest($1::uuid[]), clock_timestamp()`, outboxIDs)
	}
	// Statements of a batch run in order: the recount sees the history rows
	// of keys claimed in this same batch.
	if len(w.FirstDeliveries) > 0 {
		args, err := deliveryArgs(w.FirstDeliveries)
		if err != nil {
			return err
		}
		b.Queue(insertDeliveries, args...)
	}
	if len(w.Deliveries) > 0 {
		args, err := deliveryArgs(w.Deliveries)
		if err != nil {
			return err
		}
		b.Queue(insertDeliveries, args...)
		b.Queue(recountDeliveries, args[1:4]...)
	}
	if b.Len() > 0 {
		br := tx.SendBatch(ctx, b)
		for i := range w.Queued {
			if _, err := br.Exec(); err != nil {
				_ = br.Close()
				return fmt.Errorf("store: batch writes: %w", &QueuedError{Index: i, Err: err})
			}
		}
		if err := br.Close(); err != nil {
			return fmt.Errorf("store: batch writes: %w", err)
		}
	}
	return w.copyOutbox(ctx, tx, outboxIDs)
}

// QueuedError is the error of BatchWrites.Queued[Index]: a handler's
// queued statement, not Intake's own writes, failed.
type QueuedError struct {
	Index int
	Err   error
}

func (e *QueuedError) Error() string { return e.Err.Error() }
func (e *QueuedError) Unwrap() error { return e.Err }

// deliveryArgs are insertDeliveries' parameters for ds.
func deliveryArgs(ds []DeliveryRecord) ([]any, error) {
	n := len(ds)
	ids, integ, acct, evID, inst, answer, hints := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	at, code := make([]time.Time, n), make([]int32, n)
	for i, d := range ds {
		h, err := json.Marshal(d.RetryHints)
		if err != nil {
			return nil, err
		}
		ids[i], integ[i], acct[i], evID[i] = d.ReceiptID, d.Key.Integration, d.Key.Account, d.Key.EventID
		inst[i], answer[i], hints[i], at[i], code[i] = d.Instance, d.Answer, string(h), d.ReceivedAt, int32(d.StatusCode)
	}
	return []any{ids, integ, acct, evID, at, inst, code, answer, hints}, nil
}

var outboxColumns = []string{"id", "msg_id", "integration", "account", "event_id", "subject", "headers", "payload", "payload_seq"}

// copyOutbox writes the outbox rows with COPY (ids: theirs, as bytes, set
// by Flush; pgx's binary uuid encoding refuses a string and retries it as
// text only after building an error): payloads are the bulk of a batch's
// bytes, and an unnest bytea[] parameter made pgx grow one buffer to the
// whole batch (costly with large bodies).
func (w *BatchWrites) copyOutbox(ctx context.Context, tx pgx.Tx, ids [][16]byte) error {
	if len(w.Outbox) == 0 {
		return nil
	}
	hdr := make([]byte, 0, 512)
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"intake", "outbox"}, outboxColumns,
		pgx.CopyFromSlice(len(w.Outbox), func(i int) ([]any, error) {
			r := &w.Outbox[i]
			hdr = appendOutboxHeadersJSON(hdr[:0], r)
			var msgID *string // nil (NULL): published under the id; a pointer boxes without allocating
			if r.MsgID != "" {
				msgID = &r.MsgID
			}
			// A payload INTAKE_IN holds is not copied (migration 00023).
			var payload []byte
			var seq *uint64
			if r.PayloadSeq != 0 {
				seq = &r.PayloadSeq
			} else {
				payload = r.Payload
				if payload == nil {
					payload = []byte{} // an empty body, not "in the stream"
				}
			}
			// hdr as []byte: jsonb takes it as the JSON it is, and pgx
			// encodes a row before it asks for the next, so one buffer
			// serves every row (a string was a copy per row).
			return []any{ids[i], msgID, r.Key.Integration, r.Key.Account, r.Key.EventID, r.Subject, hdr, payload, seq}, nil
		}))
	if err != nil {
		return fmt.Errorf("store: copy outbox: %w", err)
	}
	return nil
}

// NewID returns a time-ordered UUID (v7). Outbox and execution ids are
// primary keys: ordered ids append to the index instead of splitting random
// pages, which group commit notices.
func NewID() string { return newUUID().String() }

func newUUID() uuid.UUID {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.New()
	}
	return id
}

// ExecutedCopy is a replay copy of an event that has an inbox row.
type ExecutedCopy struct {
	Key       envelope.Key
	StreamSeq uint64
	ReplayID  string
}

// ExecutedCopies reports, by index, which replay copies their replay
// already ran the handler for: an execution of the key records the copy's
// stream sequence (the copy delivered again after its commit) or its
// replay (another copy of the same replay: a replay runs a key at most
// once). The inbox row alone cannot tell: it keeps the sequence of the
// event's first message.
func ExecutedCopies(ctx context.Context, tx pgx.Tx, copies []ExecutedCopy) ([]bool, error) {
	n := len(copies)
	idx, seq := make([]int32, n), make([]int64, n)
	integ, acct, evID, replay := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, c := range copies {
		idx[i], seq[i] = int32(i), int64(c.StreamSeq)
		integ[i], acct[i], evID[i], replay[i] = c.Key.Integration, c.Key.Account, c.Key.EventID, c.ReplayID
	}
	rows, err := tx.Query(ctx, `SELECT m.i FROM unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[])
			AS m(i, integration, account, event_id, stream_seq, replay_id)
		WHERE EXISTS (SELECT 1 FROM intake.executions e
			WHERE e.integration = m.integration AND e.account = m.account AND e.event_id = m.event_id
			  AND (e.stream_seq = m.stream_seq OR e.replay_id = m.replay_id))`, idx, integ, acct, evID, seq, replay)
	if err != nil {
		return nil, fmt.Errorf("store: executed copies: %w", err)
	}
	done := make([]bool, n)
	var i int32
	if _, err := pgx.ForEachRow(rows, []any{&i}, func() error { done[i] = true; return nil }); err != nil {
		return nil, fmt.Errorf("store: executed copies: %w", err)
	}
	return done, nil
}
