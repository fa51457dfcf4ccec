package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intakehq/intake/pkg/envelope"
)

// ReplayRedeliver is the mode (intake.replays.mode) of a redelivery, recorded
// as a replay: one audit trail, one engine. A replay's mode is the
// inbox.ReplayMode of the copies it publishes (exact, reexecute).
const ReplayRedeliver = "redeliver"

// Replay states. A re-execution above the approval ceiling is recorded
// ReplayAwaitingApproval and published only once a second operator
// approves it (ApproveReplay).
const (
	ReplayAwaitingApproval = "awaiting_approval"
	ReplayRunning          = "running"
	ReplayDone             = "done"
	ReplayFailed           = "failed"
	ReplayCancelled        = "cancelled"
)

// Replay item states.
const (
	ItemPending   = "pending"
	ItemPublished = "published"
	ItemMissing   = "missing"
)

// OutcomeMissing is the predicted outcome of an item whose source message
// is gone; such items are never published.
const OutcomeMissing = "missing"

// Replay is one row of intake.replays: the audit record and the progress of
// a replay or redelivery.
type Replay struct {
	ID          string
	RequestedBy string
	CreatedAt   time.Time
	Selector    json.RawMessage
	Mode        string
	Reason      string
	DryRun      bool
	Rate        int
	// AdmitReplayedBodies: the replay's copies, once verified, skip the
	// replay guard (replays with selector.keys only; never a re-drive's).
	AdmitReplayedBodies bool
	State               string
	Matched             int64
	Published           int64
	Duplicates          int64
	Outcomes            map[string]int64
	Counts              []OutcomeCount
	Sample              []string
	// UnknownKeys are the selected keys (selector.keys) that name no
	// event Intake has seen: no inbox row, no record of a refusal. Set on
	// the answer to the request that planned the replay only; not stored.
	UnknownKeys []string
	CancelledBy *string
	Error       *string
	FinishedAt  *time.Time
	// ApprovedBy and ApprovedAt: the second operator who approved a
	// replay that awaited approval, and when.
	ApprovedBy *string
	ApprovedAt *time.Time

	// ResumeFromSeq: see the column in migration 00003.
	ResumeFromSeq uint64
}

// OutcomeCount is the number of selected events of one tenant, integration
// and type with one predicted outcome. Its json names are the keys of the
// objects in intake.replays.counts (jsonb): pgx writes and reads them so.
type OutcomeCount struct {
	Tenant      string `json:"tenant"`
	Integration string `json:"integration"`
	EventType   string `json:"event_type"`
	Outcome     string `json:"outcome"`
	Count       int64  `json:"count"`
}

// ReplayItem is one message a replay republishes.
type ReplayItem struct {
	Pos       int
	Key       envelope.Key
	Tenant    string
	EventType string
	StreamSeq uint64 // in the source stream; 0 for outbox items
	OutboxID  string // outbox redeliveries
	MsgID     string // Nats-Msg-Id of the copy, unique within the replay
	Outcome   string
	State     string
}

const replayColumns = `id::text, requested_by, created_at, selector, mode, reason, dry_run, rate, state,
	matched, published, duplicates, outcomes, counts, sample, cancelled_by, error, finished_at, resume_from_seq,
	admit_replayed_bodies, approved_by, approved_at`

func scanReplay(row pgx.Row) (Replay, error) {
	var r Replay
	var resume int64
	err := row.Scan(&r.ID, &r.RequestedBy, &r.CreatedAt, &r.Selector, &r.Mode, &r.Reason, &r.DryRun, &r.Rate, &r.State,
		&r.Matched, &r.Published, &r.Duplicates, &r.Outcomes, &r.Counts, &r.Sample, &r.CancelledBy, &r.Error,
		&r.FinishedAt, &resume, &r.AdmitReplayedBodies, &r.ApprovedBy, &r.ApprovedAt)
	r.ResumeFromSeq = uint64(resume)
	return r, err
}

// CreateReplay records r and its items in one transaction. A dry run has no
// items and is recorded finished. r.CreatedAt is filled in.
func (s *Store) CreateReplay(ctx context.Context, r *Replay, items []ReplayItem) error {
	if r.Outcomes == nil {
		r.Outcomes = map[string]int64{}
	}
	if r.Counts == nil {
		r.Counts = []OutcomeCount{}
	}
	if r.Sample == nil {
		r.Sample = []string{}
	}
	// The jsonb columns as JSON text, which every query mode sends as it
	// is: without the server's parameter types (exec, simple_protocol) pgx
	// has no encoding for the map and the struct slice, and would send
	// Sample as a text[] literal.
	var js [3]string
	for i, v := range []any{r.Outcomes, r.Counts, r.Sample} {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("store: create replay: %w", err)
		}
		js[i] = string(b)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			INSERT INTO intake.replays (id, requested_by, selector, mode, reason, dry_run, rate, state, matched,
				published, outcomes, counts, sample, resume_from_seq, error, finished_at, admit_replayed_bodies)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
			RETURNING created_at`,
			r.ID, r.RequestedBy, r.Selector, r.Mode, r.Reason, r.DryRun, r.Rate, r.State, r.Matched,
			r.Published, js[0], js[1], js[2], int64(r.ResumeFromSeq), r.Error, r.FinishedAt, r.AdmitReplayedBodies,
		).Scan(&r.CreatedAt)
		if err != nil {
			return fmt.Errorf("store: create replay: %w", err)
		}
		if len(items) == 0 {
			return nil
		}
		_, err = tx.CopyFrom(ctx, pgx.Identifier{Schema, "replay_items"},
			[]string{"replay_id", "pos", "integration", "account", "event_id", "tenant", "event_type",
				"stream_seq", "outbox_id", "msg_id", "outcome", "state"},
			pgx.CopyFromSlice(len(items), func(i int) ([]any, error) {
				it := items[i]
				var seq *int64
				if it.StreamSeq > 0 {
					v := int64(it.StreamSeq)
					seq = &v
				}
				var outbox *string
				if it.OutboxID != "" {
					outbox = &items[i].OutboxID
				}
				state := ItemPending
				if it.Outcome == OutcomeMissing {
					state = ItemMissing
				}
				return []any{r.ID, it.Pos, it.Key.Integration, it.Key.Account, it.Key.EventID, it.Tenant, it.EventType,
					seq, outbox, it.MsgID, it.Outcome, state}, nil
			}))
		if err != nil {
			return fmt.Errorf("store: create replay items: %w", err)
		}
		return nil
	})
}

// GetReplay reads one replay; ErrNotFound if there is none.
func (s *Store) GetReplay(ctx context.Context, id string) (Replay, error) {
	if !validUUID(id) {
		return Replay{}, ErrNotFound
	}
	r, err := scanReplay(s.pool.QueryRow(ctx, `SELECT `+replayColumns+` FROM intake.replays WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Replay{}, ErrNotFound
	}
	if err != nil {
		return Replay{}, fmt.Errorf("store: get replay: %w", err)
	}
	return r, nil
}

// Which dry runs ReplayFilter.DryRuns lists: by default none, as the audit
// log of what was published is what an operator reads; a dry run publishes
// nothing.
const (
	DryRunsExclude = "exclude"
	DryRunsInclude = "include"
	DryRunsOnly    = "only"
)

// DryRunChoices are the values of ReplayFilter.DryRuns.
var DryRunChoices = []string{DryRunsExclude, DryRunsInclude, DryRunsOnly}

// ReplayModes and ReplayStates are the values intake.replays.mode and state
// take: the allowed values of the audit log's filters.
var (
	ReplayModes  = []string{"exact", "reexecute", ReplayRedeliver}
	ReplayStates = []string{ReplayAwaitingApproval, ReplayRunning, ReplayDone, ReplayFailed, ReplayCancelled}
)

// ReplayFilter selects replays for ListReplays. Zero fields do not filter.
type ReplayFilter struct {
	Mode, State, RequestedBy string
	// DryRuns is DryRunsExclude (the default, ""), DryRunsInclude or
	// DryRunsOnly.
	DryRuns string
	// Since and Until bound created_at: since ≤ t < until.
	Since, Until time.Time
	// Limit caps the page. Defaults to 100; at most 1000.
	Limit  int
	Cursor string
}

// ListReplays returns one page of replays (the audit log), newest first.
func (s *Store) ListReplays(ctx context.Context, f ReplayFilter) ([]Replay, string, error) {
	limit := pageLimit(f.Limit)
	var c struct {
		At time.Time `json:"t"`
		ID string    `json:"i"`
	}
	var w conds
	w.eq("mode", f.Mode)
	w.eq("state", f.State)
	w.eq("requested_by", f.RequestedBy)
	w.between("created_at", f.Since, f.Until)
	switch f.DryRuns {
	case "", DryRunsExclude:
		w.add("NOT dry_run")
	case DryRunsOnly:
		w.add("dry_run")
	case DryRunsInclude:
	default:
		return nil, "", fmt.Errorf("store: list replays: dry runs %q: not one of %v", f.DryRuns, DryRunChoices)
	}
	if f.Cursor != "" {
		if err := decodeCursor(f.Cursor, &c); err != nil {
			return nil, "", err
		}
		w.add(`(created_at, id) < (` + w.arg(c.At) + `, ` + w.arg(c.ID) + `::uuid)`)
	}
	q := `SELECT ` + replayColumns + ` FROM intake.replays` + w.sql() + ` ORDER BY created_at DESC, id DESC LIMIT ` + w.arg(limit+1)
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return nil, "", fmt.Errorf("store: list replays: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Replay, error) { return scanReplay(row) })
	if err != nil {
		return nil, "", fmt.Errorf("store: list replays: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		c.At, c.ID = out[limit-1].CreatedAt, out[limit-1].ID
		next = encodeCursor(c)
	}
	return out, next, nil
}

// CancelReplay moves a running replay, or one awaiting approval, to
// cancelled and reports whether it was either. The replayer publishing it
// stops at its next batch.
func (s *Store) CancelReplay(ctx context.Context, id, by string) (Replay, bool, error) {
	if !validUUID(id) {
		return Replay{}, false, ErrNotFound
	}
	r, err := scanReplay(s.pool.QueryRow(ctx, `
		UPDATE intake.replays SET state = 'cancelled', cancelled_by = $2, finished_at = now()
		WHERE id = $1 AND state IN ('running', 'awaiting_approval')
		RETURNING `+replayColumns, id, by))
	if err == nil {
		return r, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Replay{}, false, fmt.Errorf("store: cancel replay: %w", err)
	}
	r, err = s.GetReplay(ctx, id)
	return r, false, err
}

// ErrSameOperator is ApproveReplay's answer to the operator who requested
// the replay: approval is a second operator's.
var ErrSameOperator = errors.New("store: a replay is approved by an operator other than its requester")

// ApproveReplay sets a replay awaiting approval running, recording by as
// its approver, unless by requested it (ErrSameOperator). changed is false,
// with the replay as it is, when it awaits no approval (any more).
func (s *Store) ApproveReplay(ctx context.Context, id, by string) (Replay, bool, error) {
	if !validUUID(id) {
		return Replay{}, false, ErrNotFound
	}
	r, err := scanReplay(s.pool.QueryRow(ctx, `
		UPDATE intake.replays SET state = 'running', approved_by = $2, approved_at = now()
		WHERE id = $1 AND state = 'awaiting_approval' AND requested_by <> $2
		RETURNING `+replayColumns, id, by))
	if err == nil {
		return r, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Replay{}, false, fmt.Errorf("store: approve replay: %w", err)
	}
	if r, err = s.GetReplay(ctx, id); err != nil {
		return r, false, err
	}
	if r.State == ReplayAwaitingApproval && r.RequestedBy == by {
		return r, false, ErrSameOperator
	}
	return r, false, nil
}

// RunningReplays lists the ids of replays still to be published, oldest first.
func (s *Store) RunningReplays(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id::text FROM intake.replays WHERE state = 'running' ORDER BY created_at`)
	if err != nil {
		return nil, fmt.Errorf("store: running replays: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: running replays: %w", err)
	}
	return ids, nil
}

// ReplayRef is a replay that republished (or was to republish) one event.
type ReplayRef struct {
	ID           string
	Mode         string
	State        string
	RequestedBy  string
	Reason       string
	CreatedAt    time.Time
	ItemState    string // pending, published or missing
	PublishedSeq *int64
}

// ReplaysOfEvent lists the replays and redeliveries that selected one
// event, oldest first (dry runs select nothing and are not listed).
func (s *Store) ReplaysOfEvent(ctx context.Context, k envelope.Key) ([]ReplayRef, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT r.id::text, r.mode, r.state, r.requested_by, r.reason, r.created_at, ri.state, ri.published_seq
		FROM intake.replay_items ri JOIN intake.replays r ON r.id = ri.replay_id
		WHERE ri.integration = $1 AND ri.account = $2 AND ri.event_id = $3
		ORDER BY r.created_at, r.id, ri.pos`, k.Integration, k.Account, k.EventID)
	if err != nil {
		return nil, fmt.Errorf("store: replays of event: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ReplayRef, error) {
		var r ReplayRef
		err := row.Scan(&r.ID, &r.Mode, &r.State, &r.RequestedBy, &r.Reason, &r.CreatedAt, &r.ItemState, &r.PublishedSeq)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: replays of event: %w", err)
	}
	return out, nil
}

// ReplayLock is the exclusive right to publish one replay: a session
// advisory lock held on a connection of its own. When the process dies or
// the connection breaks, Postgres releases it, and another replayer may
// resume the replay. Progress is written through the same connection, so a
// replayer that lost its lock cannot record progress either.
//
// A partition can leave the lock's session alive on the server after its
// client gave the connection up (every call on it is bounded by
// ReplayLockTimeout): the Store remembers that session and ends it
// (pg_terminate_backend) the next time it tries to lock the replay, so
// the replay resumes instead of staying locked by a session nobody owns.
type ReplayLock struct {
	s       *Store
	conn    *pgxpool.Conn
	id      string
	session backend
}

// ReplayLockTimeout bounds each statement on a replay's lock connection,
// so a Postgres that stops answering (a partition) pauses the replay
// instead of hanging it.
const ReplayLockTimeout = 30 * time.Second

// backend names a server session: a pid is reused, with its start time it
// is not.
type backend struct {
	pid     uint32
	started time.Time
}

// LockReplay takes the replay's lock without waiting; it returns nil (and no
// error) when another replayer holds it. A session of this Store's that
// held the lock and was given up (ReplayLock) is ended first.
func (s *Store) LockReplay(ctx context.Context, id string) (*ReplayLock, error) {
	ctx, cancel := context.WithTimeout(ctx, ReplayLockTimeout)
	defer cancel()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: lock replay: %w", err)
	}
	if err := s.endAbandoned(ctx, conn, id); err != nil {
		conn.Release()
		return nil, fmt.Errorf("store: lock replay: end its abandoned session: %w", err)
	}
	var ok bool
	var started time.Time
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended('intake.replay:' || $1, 0)),
		(SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())`, id).Scan(&ok, &started); err != nil {
		conn.Release()
		return nil, fmt.Errorf("store: lock replay: %w", err)
	}
	if !ok {
		conn.Release()
		return nil, nil
	}
	return &ReplayLock{s: s, conn: conn, id: id, session: backend{pid: conn.Conn().PgConn().PID(), started: started}}, nil
}

// endAbandoned terminates the session a given-up lock of replay id left
// on the server, if it is still there; it forgets it once it is gone.
func (s *Store) endAbandoned(ctx context.Context, conn *pgxpool.Conn, id string) error {
	s.mu.Lock()
	b, ok := s.abandoned[id]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	var there bool
	// count() evaluates its argument for every row (EXISTS would not).
	err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) > 0 FROM pg_stat_activity
		WHERE pid = $1 AND backend_start = $2`, int64(b.pid), b.started).Scan(&there)
	if err != nil {
		return err
	}
	if !there {
		s.mu.Lock()
		delete(s.abandoned, id)
		s.mu.Unlock()
	}
	return nil
}

// Release gives the lock up. It never fails: a connection that cannot
// unlock is closed, which unlocks, unless the server cannot hear it (a
// partition): then the session is remembered, and ended by the next
// LockReplay of the replay.
func (l *ReplayLock) Release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := l.conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended('intake.replay:' || $1, 0))`, l.id); err != nil {
		l.s.mu.Lock()
		if l.s.abandoned == nil {
			l.s.abandoned = map[string]backend{}
		}
		l.s.abandoned[l.id] = l.session
		l.s.mu.Unlock()
		_ = l.conn.Hijack().Close(ctx)
		return
	}
	l.conn.Release()
}

// Lost reports whether the lock's connection is closed (a statement on it
// failed or timed out): the lock may still be held by its session on the
// server, but this replayer can neither use nor release it.
func (l *ReplayLock) Lost() bool { return l.conn.Conn().IsClosed() }

// bound is ctx within ReplayLockTimeout.
func bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, ReplayLockTimeout)
}

// Replay reads the locked replay.
func (l *ReplayLock) Replay(ctx context.Context) (Replay, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	r, err := scanReplay(l.conn.QueryRow(ctx, `SELECT `+replayColumns+` FROM intake.replays WHERE id = $1`, l.id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Replay{}, ErrNotFound
	}
	if err != nil {
		return Replay{}, fmt.Errorf("store: read replay: %w", err)
	}
	return r, nil
}

// Pending returns up to limit items not yet published, in order.
func (l *ReplayLock) Pending(ctx context.Context, limit int) ([]ReplayItem, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	rows, err := l.conn.Query(ctx, `
		SELECT pos, integration, account, event_id, tenant, event_type, coalesce(stream_seq, 0),
			coalesce(outbox_id::text, ''), msg_id, outcome, state
		FROM intake.replay_items WHERE replay_id = $1 AND state = 'pending'
		ORDER BY pos LIMIT $2`, l.id, limit)
	if err != nil {
		return nil, fmt.Errorf("store: pending replay items: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ReplayItem, error) {
		var it ReplayItem
		var seq int64
		err := row.Scan(&it.Pos, &it.Key.Integration, &it.Key.Account, &it.Key.EventID, &it.Tenant, &it.EventType,
			&seq, &it.OutboxID, &it.MsgID, &it.Outcome, &it.State)
		it.StreamSeq = uint64(seq)
		return it, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: pending replay items: %w", err)
	}
	return out, nil
}

// HasPending reports whether any item is still to be published.
func (l *ReplayLock) HasPending(ctx context.Context) (bool, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	var ok bool
	err := l.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM intake.replay_items WHERE replay_id = $1 AND state = 'pending')`, l.id).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("store: pending replay items: %w", err)
	}
	return ok, nil
}

// Progress is what one batch of publishing achieved.
type Progress struct {
	// Published maps the Nats-Msg-Id of each acknowledged copy to the
	// sequence it landed at.
	Published map[string]uint64
	// Missing lists items whose source message is gone.
	Missing []int
	// Duplicates counts PubAcks the stream answered as duplicates.
	Duplicates int
	// ResumeFromSeq, when greater than the stored one, replaces it.
	ResumeFromSeq uint64
}

// Record writes p in one transaction and returns the replay's state, which
// an operator may have changed to cancelled meanwhile. Items are marked
// once: recording the same copy again changes nothing.
func (l *ReplayLock) Record(ctx context.Context, p Progress) (string, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	var state string
	err := pgx.BeginFunc(ctx, l.conn, func(tx pgx.Tx) error {
		published := int64(0)
		if len(p.Published) > 0 {
			ids, seqs := make([]string, 0, len(p.Published)), make([]int64, 0, len(p.Published))
			for id, seq := range p.Published {
				ids, seqs = append(ids, id), append(seqs, int64(seq))
			}
			tag, err := tx.Exec(ctx, `
				UPDATE intake.replay_items ri SET state = 'published', published_seq = t.seq, published_at = now()
				FROM unnest($2::text[], $3::bigint[]) AS t(msg_id, seq)
				WHERE ri.replay_id = $1 AND ri.msg_id = t.msg_id AND ri.state = 'pending'`, l.id, ids, seqs)
			if err != nil {
				return err
			}
			published = tag.RowsAffected()
		}
		recount := false
		if len(p.Missing) > 0 {
			tag, err := tx.Exec(ctx, `
				UPDATE intake.replay_items SET state = 'missing', outcome = 'missing'
				WHERE replay_id = $1 AND pos = ANY($2) AND state = 'pending'`, l.id, p.Missing)
			if err != nil {
				return err
			}
			recount = tag.RowsAffected() > 0
		}
		err := tx.QueryRow(ctx, `
			UPDATE intake.replays SET published = published + $2, duplicates = duplicates + $3,
				resume_from_seq = greatest(resume_from_seq, $4)
			WHERE id = $1 RETURNING state`, l.id, published, p.Duplicates, int64(p.ResumeFromSeq)).Scan(&state)
		if err != nil {
			return err
		}
		if recount {
			// A prediction turned out wrong: the message is gone. Recount
			// from the items so outcomes stay the truth.
			_, err = tx.Exec(ctx, `
				UPDATE intake.replays SET
					outcomes = (SELECT jsonb_object_agg(outcome, n) FROM
						(SELECT outcome, count(*) AS n FROM intake.replay_items WHERE replay_id = $1 GROUP BY outcome) o),
					counts = (SELECT jsonb_agg(jsonb_build_object('tenant', tenant, 'integration', integration,
							'event_type', event_type, 'outcome', outcome, 'count', n)
							ORDER BY tenant, integration, event_type, outcome) FROM
						(SELECT tenant, integration, event_type, outcome, count(*) AS n FROM intake.replay_items
						 WHERE replay_id = $1 GROUP BY 1, 2, 3, 4) c)
				WHERE id = $1`, l.id)
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("store: record replay progress: %w", err)
	}
	return state, nil
}

// Finish ends a running replay with state (done or failed) and an optional
// error. A replay cancelled meanwhile stays cancelled.
func (l *ReplayLock) Finish(ctx context.Context, state, errText string) error {
	ctx, cancel := bound(ctx)
	defer cancel()
	var e *string
	if errText != "" {
		e = &errText
	}
	_, err := l.conn.Exec(ctx, `UPDATE intake.replays SET state = $2, error = $3, finished_at = now()
		WHERE id = $1 AND state = 'running'`, l.id, state, e)
	if err != nil {
		return fmt.Errorf("store: finish replay: %w", err)
	}
	return nil
}

func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}
