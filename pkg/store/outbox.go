package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
)

// OutboxRow is one message waiting for (or done with) INTAKE_OUT.
type OutboxRow struct {
	ID string // uuid v7, time-ordered: the row's primary key
	// MsgID is the Nats-Msg-Id on INTAKE_OUT (envelope.OutboxMsgID); "" for
	// a row written without one, which publishes under ID (see NatsMsgID).
	MsgID   string
	Key     envelope.Key
	Subject string
	Headers map[string][]string
	// Payload is the message's body. Read from the table, it is nil when
	// PayloadSeq is set: the body is INTAKE_IN's (stream.InPayload).
	Payload []byte
	// PayloadSeq, when set, is the INTAKE_IN sequence whose message's body
	// is the payload: the row is written without a copy of it (migration
	// 00023), though a row being written may still carry Payload in memory
	// for its first publish. That message's Intake-Payload-Sha256 is the
	// row's too, and is not stored either (SetStreamPayload puts it back).
	PayloadSeq uint64
	Created    time.Time
}

// SetStreamPayload gives a row read with PayloadSeq set its payload, body,
// read from INTAKE_IN's message at PayloadSeq (stream.InPayload), and puts
// back that message's Intake-Payload-Sha256, sha, which the row does not
// store.
func (r *OutboxRow) SetStreamPayload(body []byte, sha string) {
	r.Payload = body
	if _, ok := r.Headers[envelope.HeaderPayloadSHA256]; !ok && sha != "" {
		if r.Headers == nil {
			r.Headers = map[string][]string{}
		}
		r.Headers[envelope.HeaderPayloadSHA256] = []string{sha}
	}
}

// NatsMsgID is the row's Nats-Msg-Id on INTAKE_OUT: MsgID, or ID for a
// row written without one (before migration 00009, or by a caller that
// set none).
func (r *OutboxRow) NatsMsgID() string {
	if r.MsgID != "" {
		return r.MsgID
	}
	return r.ID
}

// ClaimOutbox takes up to limit rows pending for longer than olderThan off
// the pending list, oldest first, skipping rows another relay holds, and
// returns them in insertion order — one statement that both locks and
// claims. The caller publishes them and commits only when every PubAck
// arrived; rows whose publish failed go back with Unpublish before the
// commit (or the whole transaction rolls back). Outbox rows themselves are
// never updated.
func ClaimOutbox(ctx context.Context, tx pgx.Tx, limit int, olderThan time.Duration) ([]OutboxRow, error) {
	if _, err := tx.Exec(ctx, claimPlanSQL); err != nil {
		return nil, fmt.Errorf("store: claim outbox: %w", err)
	}
	rows, err := tx.Query(ctx, claimOutboxSQL, limit, olderThan)
	if err != nil {
		return nil, fmt.Errorf("store: claim outbox: %w", err)
	}
	out := make([]OutboxRow, 0, limit)
	out, err = pgx.AppendRows(out, rows, func(row pgx.CollectableRow) (OutboxRow, error) {
		var r OutboxRow
		var hdr []byte
		var seq int64
		if err := row.Scan(&r.ID, &r.MsgID, &r.Key.Integration, &r.Key.Account, &r.Key.EventID, &r.Subject, &hdr, &r.Payload,
			&seq, &r.Created); err != nil {
			return r, err
		}
		r.PayloadSeq = uint64(seq)
		var err error
		r.Headers, err = parseHeadersJSON(hdr)
		r.restoreKeyHeaders()
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim outbox: %w", err)
	}
	return out, nil
}

// claimPlanSQL, run first in the claim's transaction, plans the claim for
// what it is: a probe for at most limit ids.
//
//   - plan_cache_mode: the outbox is partitioned by day, with a key on id
//     in each, and the join probes each partition per claimed id. A generic
//     plan, made without the limit, may instead hash the claim and read
//     every partition whole (it does with a pending backlog of 300,000);
//     planned for each claim, with the limit known, it probes.
//   - jit: the planner estimates the join from the outbox's size, not from
//     the claim's few rows, so the estimated cost grows with the outbox
//     until it passes jit_above_cost (100,000) and then the optimize and
//     inline thresholds (500,000): from then on every claim compiled about
//     50 functions with LLVM before running — 0.5–0.9 s of CPU each, every
//     second or two while the relay found nothing to take: a third of a
//     core of the soak's Postgres by its second minute, more as the outbox
//     grew (issue 22). The claim reads a few hundred rows at most;
//     compiling never pays. TestClaimOutboxIsNeverCompiled checks it.
//   - enable_seqscan: the claimed ids are deleted through the primary key,
//     never by reading the pending list whole.
const claimPlanSQL = `SELECT set_config('plan_cache_mode', 'force_custom_plan', true), set_config('jit', 'off', true),
	set_config('enable_seqscan', 'off', true)`

// claimOutboxSQL deletes up to $1 ids pending for longer than $2 (oldest
// first, skipping locked ones) and returns their rows in insertion order.
//
// Both statements that delete from outbox_pending (this claim and the
// processor's mark, markPublishedSQL) lock their ids in an
// ARRAY(SELECT … FOR UPDATE SKIP LOCKED) and delete id = ANY of it: the
// array is an InitPlan, run once per statement. Written as
// id IN (SELECT … FOR UPDATE SKIP LOCKED), the locking subquery was the
// inner side of a semi join, and when the table's statistics said
// outbox_pending was small (an autoanalyze in a quiet second) the planner
// could choose a nested loop that runs it again for every row of the outer
// side: the whole pending list for a claim, each id for a mark. Each run
// skips the rows the statement has already deleted and locks the next
// ones, so such a claim takes every pending row, not its limit. In issue
// 22's soak a claim ran that way for minutes on one core; its open
// snapshot kept every dead row of the pending list in place, the marks
// grew to 150,000 buffer visits each (their own locking scan is 1,500),
// and the pending list to 90,000 rows within two minutes.
// TestPendingDeletesLockOnce forces the nested loop and checks that the
// lock runs once.
const claimOutboxSQL = `
		WITH c AS (
			DELETE FROM intake.outbox_pending
			WHERE id = ANY(ARRAY(SELECT id FROM intake.outbox_pending WHERE created_at <= now() - $2::interval
				ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED))
			RETURNING id)
		SELECT o.id::text, coalesce(o.msg_id, o.id::text), o.integration, o.account, o.event_id, o.subject, o.headers, o.payload,
			coalesce(o.payload_seq, 0), o.created_at
		FROM intake.outbox o JOIN c USING (id)
		ORDER BY o.seq`

// MarkPublished takes ids the processor published itself (every PubAck
// received) off the pending list. Ids a relay holds right now are skipped:
// the relay publishes them again (INTAKE_OUT drops the copy) and deletes
// them itself. The commit does not wait for its WAL flush
// (synchronous_commit off): losing it in a crash means the relay publishes
// those rows again under the same Nats-Msg-Id, dropped as duplicates inside
// the stream's window — not worth a fsync per mark.
//
// The ids go markChunk per statement, each statement probing the primary
// key for its ids (markPublishedSQL): the cost follows the ids, never the
// table's size.
func (s *Store) MarkPublished(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	raw, err := uuidBytes(ids)
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`SET LOCAL synchronous_commit = off`)
		b.Queue(markPlanSQL)
		for c := range slices.Chunk(raw, markChunk) {
			b.Queue(markPublishedSQL, c)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("store: mark %d outbox rows published: %w", len(ids), err)
	}
	return nil
}

// markChunk bounds the ids of one mark statement, and so the rows it locks.
const markChunk = 512

// markPublishedSQL deletes the pending ids in $1 that no relay holds, and
// markPlanSQL, run first in the mark's transaction, keeps it on the
// primary key. Under sustained load outbox_pending is a few hundred live
// rows among up to a minute or two of dead ones (autovacuum visits a
// database at most once per autovacuum_naptime; migration 00011).
// Estimated from its live rows, the planner read the table twice per mark
// (a hash semi join over two sequential scans, dead pages included), so a
// mark cost what the table's bloat cost rather than what its ids did —
// most when the marker, behind after a slow period, sent 4,096 ids at once:
// the likely cause of the marks that ran past their 10s deadline in
// issue 22's run. With sequential scans off both the lock and the delete
// probe the primary key (TestMarkPublishedProbesThePrimaryKey checks the
// plan), and the lock runs once (claimOutboxSQL says why).
const (
	markPlanSQL      = `SET LOCAL enable_seqscan = off`
	markPublishedSQL = `DELETE FROM intake.outbox_pending WHERE id = ANY(ARRAY(
	SELECT id FROM intake.outbox_pending WHERE id = ANY($1::uuid[]) FOR UPDATE SKIP LOCKED))`
)

// Unpublish puts rows whose publish failed back on the pending list (aged
// from their creation, so the lag stays honest) and records the reason,
// inside the claiming transaction.
func Unpublish(ctx context.Context, tx pgx.Tx, ids []string, reason string) error {
	if len(ids) == 0 {
		return nil
	}
	raw, err := uuidBytes(ids)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO intake.outbox_pending (id, created_at)
		SELECT id, created_at FROM intake.outbox WHERE id = ANY($1::uuid[]) ON CONFLICT DO NOTHING`, raw)
	b.Queue(`UPDATE intake.outbox SET attempts = attempts + 1, last_error = $2 WHERE id = ANY($1::uuid[])`, raw, reason)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("store: unpublish outbox rows: %w", err)
	}
	return nil
}

// OutboxLag returns the number of unpublished rows and the age of the oldest.
func (s *Store) OutboxLag(ctx context.Context) (int64, time.Duration, error) {
	var n int64
	var oldest *time.Time
	err := s.pool.QueryRow(ctx, `SELECT count(*), min(created_at) FROM intake.outbox_pending`).Scan(&n, &oldest)
	if err != nil {
		return 0, 0, fmt.Errorf("store: outbox lag: %w", err)
	}
	if oldest == nil {
		return n, 0, nil
	}
	return n, time.Since(*oldest), nil
}

// OutboxDaysAhead is how many days of outbox partitions are kept made
// ahead of today: a processor that cannot reach Postgres to make more has
// that long before an insert finds no partition.
const OutboxDaysAhead = 7

// Lock waits when the outbox's partitions change. A DROP's exclusive lock
// queues every insert behind it while it waits, so it gives up quickly —
// behind a long reader of the outbox (a relay awaiting PubAcks, a replay's
// selection) — and is tried again at the next pass: a stall of at most
// this, once a minute, until it gets through. Making a partition (an
// attach) blocks no insert and may wait longer, for another processor's
// pass.
const (
	outboxDropLockTimeout = "200ms"
	outboxAddLockTimeout  = "5s"
)

// AddOutboxPartitions makes the outbox's daily partitions through
// OutboxDaysAhead days after at, where missing, and returns how many it made.
func (s *Store) AddOutboxPartitions(ctx context.Context, at time.Time) (int, error) {
	var made int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '"+outboxAddLockTimeout+"'"); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT intake.outbox_add_partitions($1, $2)`, at, OutboxDaysAhead).Scan(&made)
	})
	if err != nil {
		return 0, fmt.Errorf("store: add outbox partitions: %w", err)
	}
	return made, nil
}

// DroppedPartition is an outbox partition retention dropped.
type DroppedPartition struct {
	Name string
	Rows int64 // the planner's estimate
}

// DropOutboxPartitions drops each outbox partition whose every row was
// created before cutoff, unless one of them is still pending: published
// rows leave a day at a time, pending ones never. A dry run drops nothing
// and returns what it would drop.
func (s *Store) DropOutboxPartitions(ctx context.Context, cutoff time.Time, dryRun bool) ([]DroppedPartition, error) {
	var dropped []DroppedPartition
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '"+outboxDropLockTimeout+"'"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT dropped, est_rows FROM intake.outbox_drop_partitions($1, $2)`, cutoff, dryRun)
		if err != nil {
			return err
		}
		dropped, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (DroppedPartition, error) {
			var d DroppedPartition
			err := r.Scan(&d.Name, &d.Rows)
			return d, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: drop outbox partitions: %w", err)
	}
	return dropped, nil
}

// OutboxPartitionsUntil returns the end of the outbox's last partition: an
// insert created at or after it fails.
func (s *Store) OutboxPartitionsUntil(ctx context.Context) (time.Time, error) {
	var until *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT max(until) FROM intake.outbox_partitions()`).Scan(&until); err != nil {
		return time.Time{}, fmt.Errorf("store: outbox partitions: %w", err)
	}
	if until == nil {
		return time.Time{}, nil
	}
	return *until, nil
}

// uuidBytes is ids as a uuid[] parameter pgx encodes in binary. Given
// strings, pgx first builds an error quoting the whole slice, then falls
// back to text, a visible share of the processor's CPU in profiles (its
// marks and execution ids) before they went as bytes.
func uuidBytes(ids []string) ([][16]byte, error) {
	raw := make([][16]byte, len(ids))
	for i, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil {
			return nil, fmt.Errorf("store: outbox id %q: %w", id, err)
		}
		raw[i] = u
	}
	return raw, nil
}
