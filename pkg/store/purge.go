package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intakehq/intake/pkg/envelope"
)

// Cutoffs say which rows a purge removes: each kind of row older than its
// cutoff. Retention is the caller's (config.Retention, read against a clock
// the caller picks, so tests inject one).
type Cutoffs struct {
	// Inbox applies to processed and stale inbox rows (by their last
	// delivery) and the replay guard's body records (by first sight) of
	// every integration not in InboxFor.
	Inbox time.Time
	// InboxFor holds the integrations that keep their keys longer
	// (integrations[].inbox_retention).
	InboxFor map[string]time.Time
	// History applies to the delivery history (received_at) and the
	// executions (executed_at).
	History time.Time
	// Evidence applies to conflicts, failed and quarantined inbox rows,
	// rejected messages and finished replays with their items.
	Evidence time.Time
}

// Purged is what one purge step removed, or would remove (a dry run).
type Purged struct {
	Table string // intake.<table>
	What  string // which rows: "processed", "failed and quarantined", …
	Rows  int64
	Took  time.Duration // the purge's time on the step (0 in a dry run)
}

// purgeStep is one kind of row past its cutoff, removed in batches of
// about batch rows, one transaction a batch. Each batch starts where the
// one before it stopped (a time, from), so a pass reads what it deletes
// once: a batch that started from the table's oldest end every time would
// wade through the rows its predecessors deleted and vacuum has not yet
// reclaimed, and a large backlog would cost the square of its size.
type purgeStep struct {
	table, what string
	// count is the dry run's query, with its arguments.
	count     string
	countArgs []any
	// batch deletes the next batch at or after from and returns how many
	// rows went, where the next batch starts, and whether the step is done.
	batch func(ctx context.Context, tx pgx.Tx, from time.Time, size int) (n int64, next time.Time, done bool, err error)
}

// purgeSteps lists the steps for c, in the order a pass runs them: the
// inbox and the guard's records by integration group, the evidence
// tables' children before their parents. A step's state (a BRIN step's
// window) lives in its closure: one list serves one pass.
func purgeSteps(c Cutoffs) []purgeStep {
	var steps []purgeStep
	others := make([]string, 0, len(c.InboxFor))
	for in := range c.InboxFor {
		others = append(others, in)
	}
	// group is the filter on integration for the default cutoff (every
	// integration without its own) or for one integration; $3 after a
	// query's cutoff and statuses or window bounds.
	group := func(integration string) (filter string, arg any, label string) {
		if integration == "" {
			return `AND integration <> ALL($3)`, others, ""
		}
		return `AND integration = $3`, integration, " (" + integration + ")"
	}
	done := []string{string(StatusProcessed), string(StatusStale)}
	evidence := []string{string(StatusFailed), string(StatusQuarantined)}
	inbox := func(what string, statuses []string, cutoff time.Time, integration string) purgeStep {
		filter, arg, label := group(integration)
		if statuses[0] == evidence[0] {
			filter, arg, label = `AND $3::text IS NULL`, nil, "" // every integration
		}
		return purgeStep{table: "inbox", what: what + label,
			count:     `SELECT count(*) FROM intake.inbox WHERE status = ANY($2) AND last_received_at < $1 ` + filter,
			countArgs: []any{cutoff, statuses, arg},
			batch: func(ctx context.Context, tx pgx.Tx, from time.Time, size int) (int64, time.Time, bool, error) {
				return purgeInbox(ctx, tx, statuses, from, cutoff, size, filter, arg)
			}}
	}
	for _, in := range append([]string{""}, others...) {
		cutoff := c.Inbox
		if in != "" {
			cutoff = c.InboxFor[in]
		}
		filter, arg, label := group(in)
		steps = append(steps, inbox("processed and stale", done, cutoff, in),
			byBRIN("body_hashes", "replay guard records"+label, "(integration, payload_sha256)", "first_seen_at", cutoff, filter, arg))
	}
	steps = append(steps,
		inbox("failed and quarantined", evidence, c.Evidence, ""),
		byBRIN("deliveries", "delivery history", "receipt_id", "received_at", c.History, "", nil),
		byBRIN("executions", "executions", "id", "executed_at", c.History, "", nil),
		byBtree("conflicts", "conflicts", "id", "detected_at", c.Evidence),
		byBtree("rejected_messages", "rejected messages", "id", "rejected_at", c.Evidence),
		// A replay's items go first, a batch at a time (a replay may hold
		// millions), then the replay once it has none. Replays are few:
		// these two start from the oldest end every batch.
		purgeStep{table: "replay_items", what: "items of finished replays",
			count:     `SELECT count(*) FROM intake.replay_items WHERE replay_id IN (` + oldReplays + `)`,
			countArgs: []any{c.Evidence},
			batch: func(ctx context.Context, tx pgx.Tx, from time.Time, size int) (int64, time.Time, bool, error) {
				tag, err := tx.Exec(ctx, `DELETE FROM intake.replay_items WHERE (replay_id, pos) IN (
					SELECT replay_id, pos FROM intake.replay_items WHERE replay_id IN (`+oldReplays+`) LIMIT $2)`, c.Evidence, size)
				return tag.RowsAffected(), from, tag.RowsAffected() < int64(size), err
			}},
		purgeStep{table: "replays", what: "finished replays",
			count:     `SELECT count(*) FROM intake.replays r WHERE r.id IN (` + oldReplays + `)`,
			countArgs: []any{c.Evidence},
			batch: func(ctx context.Context, tx pgx.Tx, from time.Time, size int) (int64, time.Time, bool, error) {
				tag, err := tx.Exec(ctx, `DELETE FROM intake.replays WHERE id IN (
					SELECT id FROM intake.replays r WHERE r.id IN (`+oldReplays+`)
					  AND NOT EXISTS (SELECT 1 FROM intake.replay_items i WHERE i.replay_id = r.id) LIMIT $2)`, c.Evidence, size)
				return tag.RowsAffected(), from, tag.RowsAffected() < int64(size), err
			}},
	)
	return steps
}

// oldReplays selects the replays a purge may remove: created before the
// cutoff ($1) and no longer running.
const oldReplays = `SELECT id FROM intake.replays WHERE created_at < $1 AND state <> 'running'`

// byBtree is the step for a table whose rows go by a time column with a
// btree index: the oldest size rows at or after from, in the index's order.
func byBtree(table, what, pk, col string, cutoff time.Time) purgeStep {
	return purgeStep{table: table, what: what,
		count:     `SELECT count(*) FROM intake.` + table + ` WHERE ` + col + ` < $1`,
		countArgs: []any{cutoff},
		batch: func(ctx context.Context, tx pgx.Tx, from time.Time, size int) (int64, time.Time, bool, error) {
			var n int64
			var last *time.Time
			err := tx.QueryRow(ctx, `WITH d AS (DELETE FROM intake.`+table+` WHERE `+pk+` IN (
					SELECT `+pk+` FROM intake.`+table+` WHERE `+col+` >= $1 AND `+col+` < $2 ORDER BY `+col+` LIMIT $3)
				RETURNING `+col+`) SELECT count(*), max(`+col+`) FROM d`, from, cutoff, size).Scan(&n, &last)
			if err != nil || last == nil {
				return n, from, true, err
			}
			return n, *last, n < int64(size), nil
		}}
}

// historyBatches is how many batches of rows one window of a BRIN step
// deletes: history rows hold no claim up, and fewer, larger transactions
// purge them faster.
const historyBatches = 8

// byBRIN is the step for a table written in time order whose time column
// has a BRIN index (no order to walk): it deletes time windows, from the
// oldest row past the cutoff (one read of the old block ranges a pass) up
// to the cutoff, each window sized from the last to hold about a batch.
// filter and arg narrow it to an integration group ($3).
func byBRIN(table, what, pk, col string, cutoff time.Time, filter string, arg any) purgeStep {
	if filter == "" {
		filter = `AND $3::text IS NULL`
	}
	window := time.Second
	return purgeStep{table: table, what: what,
		count:     `SELECT count(*) FROM intake.` + table + ` WHERE ` + col + ` < $1 ` + filter + ` AND $2::int IS NULL`,
		countArgs: []any{cutoff, nil, arg},
		batch: func(ctx context.Context, tx pgx.Tx, from time.Time, size int) (int64, time.Time, bool, error) {
			if from.IsZero() {
				var oldest *time.Time
				if err := tx.QueryRow(ctx, `SELECT min(`+col+`) FROM intake.`+table+` WHERE `+col+` < $1 `+filter+
					` AND $2::int IS NULL`, cutoff, nil, arg).Scan(&oldest); err != nil || oldest == nil {
					return 0, from, true, err
				}
				from = *oldest
			}
			to := from.Add(window)
			if to.After(cutoff) {
				to = cutoff
			}
			tag, err := tx.Exec(ctx, `DELETE FROM intake.`+table+` WHERE `+col+` >= $1 AND `+col+` < $2 `+filter, from, to, arg)
			if err != nil {
				return 0, from, true, err
			}
			// These rows are nobody's to wait for (no claim reads them
			// under a lock), so a window holds historyBatches batches.
			switch n, want := tag.RowsAffected(), int64(size*historyBatches); {
			case n < want/2 && window < 24*time.Hour:
				window *= 2
			case n > 2*want && window > time.Millisecond:
				window /= 2
			}
			return tag.RowsAffected(), to, !to.Before(cutoff), nil
		}}
}

// purgeInbox deletes the oldest (up to size) inbox rows of the statuses
// whose last delivery is at or after from and before cutoff. It takes the
// same per-key advisory locks as the claim and the receipt fold (lockKeys,
// in hash order) before it deletes, and checks each row again under them:
// a delivery that reached a key first keeps it (its last_received_at
// moved), one that comes after finds no row and is a new event. A claim
// waits at most for one batch; lock_timeout bounds the purge's own wait for
// a busy key.
func purgeInbox(ctx context.Context, tx pgx.Tx, statuses []string, from, cutoff time.Time, size int, filter string, arg any) (int64, time.Time, bool, error) {
	rows, err := tx.Query(ctx, `SELECT integration, account, event_id, last_received_at FROM intake.inbox
		WHERE status = ANY($2) AND last_received_at < $1 `+filter+` AND last_received_at >= $4
		ORDER BY last_received_at LIMIT `+fmt.Sprint(size), cutoff, statuses, arg, from)
	if err != nil {
		return 0, from, true, err
	}
	var integ, acct, id, keys []string
	var k envelope.Key
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&k.Integration, &k.Account, &k.EventID, &at}, func() error {
		integ, acct, id = append(integ, k.Integration), append(acct, k.Account), append(id, k.EventID)
		keys = append(keys, k.String())
		from = at
		return nil
	})
	if err != nil || len(keys) == 0 {
		return 0, from, true, err
	}
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
		return 0, from, true, err
	}
	if err := lockKeys(ctx, tx, keys); err != nil {
		return 0, from, true, err
	}
	tag, err := tx.Exec(ctx, `DELETE FROM intake.inbox i
		USING unnest($3::text[], $4::text[], $5::text[]) AS t(integration, account, event_id)
		WHERE (i.integration, i.account, i.event_id) = (t.integration, t.account, t.event_id)
		  AND i.status = ANY($2) AND i.last_received_at < $1`, cutoff, statuses, integ, acct, id)
	return tag.RowsAffected(), from, len(keys) < size, err
}

// PurgeCount is a dry run: what a purge with c would remove now, per step,
// steps with nothing to remove left out.
func (s *Store) PurgeCount(ctx context.Context, c Cutoffs) ([]Purged, error) {
	var out []Purged
	for _, st := range purgeSteps(c) {
		var n int64
		if err := s.pool.QueryRow(ctx, st.count, st.countArgs...).Scan(&n); err != nil {
			return nil, fmt.Errorf("store: count %s past retention: %w", st.what, err)
		}
		if n > 0 {
			out = append(out, Purged{Table: st.table, What: st.what, Rows: n})
		}
	}
	return out, nil
}

// Purge removes every row past its cutoff, step by step in batches of
// about size rows (a transaction each), and returns what it removed. It
// stops at ctx's end and returns what it had removed with ctx's error; a
// batch that fails ends the pass with its error (the next pass resumes:
// every step starts from what is past its cutoff then).
func (s *Store) Purge(ctx context.Context, c Cutoffs, size int) ([]Purged, error) {
	var out []Purged
	for _, st := range purgeSteps(c) {
		var total int64
		var from time.Time
		start := time.Now()
		for {
			var n int64
			var done bool
			err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				var err error
				n, from, done, err = st.batch(ctx, tx, from, size)
				return err
			})
			total += n
			if err != nil {
				if total > 0 {
					out = append(out, Purged{Table: st.table, What: st.what, Rows: total, Took: time.Since(start)})
				}
				return out, fmt.Errorf("store: purge %s: %w", st.what, err)
			}
			if done {
				break
			}
		}
		if total > 0 {
			out = append(out, Purged{Table: st.table, What: st.what, Rows: total, Took: time.Since(start)})
		}
	}
	return out, nil
}

// PurgeLock is the right to run the purge: one runner at a time across
// every processor on the database. It is a session advisory lock on a
// connection of its own, released when the holder releases it, dies or
// loses the connection.
type PurgeLock struct{ conn *pgxpool.Conn }

// purgeLockKey is the purge's session advisory lock.
const purgeLockSQL = `hashtextextended('intake.purge', 0)`

// LockPurge takes the purge lock without waiting; nil (and no error) means
// another runner holds it.
func (s *Store) LockPurge(ctx context.Context) (*PurgeLock, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: lock purge: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+purgeLockSQL+`)`).Scan(&ok); err != nil {
		conn.Release()
		return nil, fmt.Errorf("store: lock purge: %w", err)
	}
	if !ok {
		conn.Release()
		return nil, nil
	}
	return &PurgeLock{conn: conn}, nil
}

// Release gives the lock up; a connection that cannot unlock is closed,
// which unlocks.
func (l *PurgeLock) Release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := l.conn.Exec(ctx, `SELECT pg_advisory_unlock(`+purgeLockSQL+`)`); err != nil {
		_ = l.conn.Hijack().Close(ctx)
		return
	}
	l.conn.Release()
}

// TableStats is one table's size and its oldest rows, as the purge's
// metrics report them.
type TableStats struct {
	Table string
	Bytes int64 // with indexes and TOAST
	// Oldest is the age of the table's oldest row, for tables whose time
	// column has a btree index (inbox, conflicts, rejected_messages,
	// replays); nil for the others (deliveries, executions, body_hashes
	// have BRIN indexes, where a minimum is a full read) and when empty.
	Oldest *time.Duration
	// Overdue is how far past its cutoff the oldest row the purge should
	// have removed is: 0 when the purge has kept up. A read of the rows
	// past the cutoff only, cheap on every table while it is 0.
	Overdue time.Duration
}

// retentionTables are the purged tables with their time column, whether a
// btree serves its minimum, and the rows a cutoff applies to.
var retentionTables = []struct {
	table, col string
	btree      bool
	scope      string // extra predicate: the inbox's kept statuses, finished replays
	cutoff     func(Cutoffs) time.Time
}{
	{"inbox", "last_received_at", true, `status IN ('processed', 'stale')`, func(c Cutoffs) time.Time { return c.Inbox }},
	{"body_hashes", "first_seen_at", false, "", func(c Cutoffs) time.Time { return c.Inbox }},
	{"deliveries", "received_at", false, "", func(c Cutoffs) time.Time { return c.History }},
	{"executions", "executed_at", false, "", func(c Cutoffs) time.Time { return c.History }},
	{"conflicts", "detected_at", true, "", func(c Cutoffs) time.Time { return c.Evidence }},
	{"rejected_messages", "rejected_at", true, "", func(c Cutoffs) time.Time { return c.Evidence }},
	{"replays", "created_at", true, `state <> 'running'`, func(c Cutoffs) time.Time { return c.Evidence }},
}

// RetentionStats reads each purged table's size, oldest row and overdue
// rows against c at now. For the inbox and the replay guard, Overdue
// counts the integrations without an inbox_retention of their own.
func (s *Store) RetentionStats(ctx context.Context, c Cutoffs, now time.Time) ([]TableStats, error) {
	others := make([]string, 0, len(c.InboxFor))
	for in := range c.InboxFor {
		others = append(others, in)
	}
	out := make([]TableStats, 0, len(retentionTables))
	for _, t := range retentionTables {
		st := TableStats{Table: t.table}
		scope, args := "", []any{t.cutoff(c)}
		if t.scope != "" {
			scope = " AND " + t.scope
		}
		if t.table == "inbox" || t.table == "body_hashes" {
			scope += " AND integration <> ALL($2)"
			args = append(args, others)
		}
		oldest := `NULL::timestamptz`
		switch {
		case t.table == "inbox":
			// One index probe per status: inbox_status_idx leads with it.
			oldest = `(SELECT min(m) FROM (
				SELECT min(last_received_at) AS m FROM intake.inbox WHERE status = 'processed'
				UNION ALL SELECT min(last_received_at) FROM intake.inbox WHERE status = 'stale'
				UNION ALL SELECT min(last_received_at) FROM intake.inbox WHERE status = 'failed'
				UNION ALL SELECT min(last_received_at) FROM intake.inbox WHERE status = 'quarantined') AS s)`
		case t.btree:
			oldest = `(SELECT min(` + t.col + `) FROM intake.` + t.table + `)`
		}
		var overdueAt, oldestAt *time.Time
		q := `SELECT pg_total_relation_size('intake.` + t.table + `'),
			(SELECT min(` + t.col + `) FROM intake.` + t.table + ` WHERE ` + t.col + ` < $1` + scope + `), ` + oldest
		if err := s.pool.QueryRow(ctx, q, args...).Scan(&st.Bytes, &overdueAt, &oldestAt); err != nil {
			return nil, fmt.Errorf("store: retention stats of %s: %w", t.table, err)
		}
		if overdueAt != nil {
			st.Overdue = t.cutoff(c).Sub(*overdueAt)
		}
		if oldestAt != nil {
			age := now.Sub(*oldestAt)
			st.Oldest = &age
		}
		out = append(out, st)
	}
	return out, nil
}
