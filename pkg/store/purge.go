package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
)

// Cutoffs say which rows a purge removes: each kind of row older than its
// cutoff. Retention is the caller's (config.Retention, read against a clock
// the caller picks, so tests inject one).
type Cutoffs struct {
	// Inbox applies to processed and stale inbox rows (by their last
	// delivery), with their delivery history and executions, and to the
	// replay guard's body records (by first sight) of every integration
	// not in InboxFor.
	Inbox time.Time
	// InboxFor holds the integrations with an inbox_retention of their own.
	InboxFor map[string]time.Time
	// History applies to delivery receipts of events the inbox does not
	// hold (answered duplicate or unavailable, never processed): the rest
	// of the history, and every execution, goes with its inbox row; the
	// ingress refusal counts and the HTTP destinations' delivery log too.
	History time.Time
	// Evidence applies to failed and quarantined inbox rows (with their
	// history), conflicts, rejected messages, failed handler attempts,
	// resolutions of failure groups and finished replays with their items.
	Evidence time.Time
}

// Purged is what a purge removed from one table for one reason, or would
// remove (a dry run).
type Purged struct {
	Table string // intake.<table>
	What  string // which rows: "processed", "failed", …
	Rows  int64
	Took  time.Duration // the purge's time on the step (0 in a dry run)
}

// purgeStep is one kind of row past its cutoff, removed in batches of
// about size rows, one transaction a batch. Each batch starts where the one
// before it stopped (a time, from, walked in the order of a btree index),
// so a pass reads what it deletes once: a batch that started from the
// table's oldest end every time would wade through the rows its
// predecessors deleted and vacuum has not yet reclaimed, and a large
// backlog would cost the square of its size.
type purgeStep struct {
	table, what string
	// count is the dry run's query, with its arguments: one row of
	// (table, rows) per table the step removes from.
	count     string
	countArgs []any
	// batch deletes the next batch at or after from and returns the rows
	// removed per table, where the next batch starts and whether the step
	// is done.
	batch func(ctx context.Context, tx pgx.Tx, from time.Time, size int) (n map[string]int64, next time.Time, done bool, err error)
}

// purgeSteps lists the steps for c, in the order a pass runs them.
func purgeSteps(c Cutoffs) []purgeStep {
	var steps []purgeStep
	others := make([]string, 0, len(c.InboxFor))
	for in := range c.InboxFor {
		others = append(others, in)
	}
	// group narrows a step to the integrations without an inbox_retention
	// of their own (integration "") or to one integration; $3 in the
	// step's queries.
	group := func(integration string) (filter string, arg any, label string) {
		if integration == "" {
			return `AND integration <> ALL($3)`, others, ""
		}
		return `AND integration = $3`, integration, " (" + integration + ")"
	}
	every := func(string) (string, any, string) { return `AND $3::text IS NULL`, nil, "" }
	for _, in := range append([]string{""}, others...) {
		cutoff := c.Inbox
		if in != "" {
			cutoff = c.InboxFor[in]
		}
		filter, arg, label := group(in)
		for _, status := range []inbox.Status{inbox.StatusProcessed, inbox.StatusStale} {
			steps = append(steps, inboxStep(string(status), cutoff, filter, arg, label))
		}
		// The replay guard's records of both kinds (store.FirstKeys): by
		// body (0.16's, guarding every type) and by body and type.
		steps = append(steps,
			byTime("body_hashes", "replay guard records"+label, "(integration, payload_sha256)", "first_seen_at",
				cutoff, filter, arg),
			byTime("body_type_hashes", "replay guard records by type"+label, "(integration, payload_sha256, event_type)", "first_seen_at",
				cutoff, filter, arg))
	}
	filter, arg, _ := every("")
	for _, status := range []inbox.Status{inbox.StatusFailed, inbox.StatusQuarantined} {
		steps = append(steps, inboxStep(string(status), c.Evidence, filter, arg, ""))
	}
	// Receipts of deliveries the inbox never held (answered duplicate or
	// unavailable: the accepted one is written with the claim); the rest
	// of the history, and every execution, went with their inbox rows.
	noInbox := `AND answer <> 'accepted' AND ` + notInInbox + ` AND $3::text IS NULL` // envelope.AnswerAccepted (answer_test.go)
	steps = append(steps,
		byTime("deliveries", "receipts of events not in the inbox", "receipt_id", "received_at", c.History, noInbox, nil),
		byTime("ingress_refusals", "ingress refusal counts", "id", "window_end", c.History, filter, arg),
		byTime("dispatch_attempts", "delivery log of HTTP destinations", "id", "attempted_at", c.History, filter, arg),
		byTime("conflicts", "conflicts", "id", "detected_at", c.Evidence, filter, arg),
		byTime("rejected_messages", "rejected messages", "id", "rejected_at", c.Evidence, filter, arg),
		byTime("handler_attempts", "failed handler attempts", "id", "failed_at", c.Evidence, filter, arg),
		byTime("failure_resolutions", "resolutions of failure groups", "id", "resolved_at", c.Evidence, filter, arg),
		byTime("destination_actions", "operators' pauses and resumes of destinations", "id", "at", c.Evidence, filter, arg),
		// A replay's items go first, a batch at a time (a replay may hold
		// millions), then the replay once it has none. Replays are few:
		// these two start from the oldest end every batch.
		purgeStep{table: "replay_items", what: "items of finished replays",
			count:     `SELECT 'replay_items', count(*) FROM intake.replay_items WHERE replay_id IN (` + oldReplays + `)`,
			countArgs: []any{c.Evidence},
			batch: func(ctx context.Context, tx pgx.Tx, from time.Time, size int) (map[string]int64, time.Time, bool, error) {
				tag, err := tx.Exec(ctx, `DELETE FROM intake.replay_items WHERE (replay_id, pos) IN (
					SELECT replay_id, pos FROM intake.replay_items WHERE replay_id IN (`+oldReplays+`) LIMIT $2)`, c.Evidence, size)
				return map[string]int64{"replay_items": tag.RowsAffected()}, from, tag.RowsAffected() < int64(size), err
			}},
		purgeStep{table: "replays", what: "finished replays",
			count:     `SELECT 'replays', count(*) FROM intake.replays r WHERE r.id IN (` + oldReplays + `)`,
			countArgs: []any{c.Evidence},
			batch: func(ctx context.Context, tx pgx.Tx, from time.Time, size int) (map[string]int64, time.Time, bool, error) {
				tag, err := tx.Exec(ctx, `DELETE FROM intake.replays WHERE id IN (
					SELECT id FROM intake.replays r WHERE r.id IN (`+oldReplays+`)
					  AND NOT EXISTS (SELECT 1 FROM intake.replay_items i WHERE i.replay_id = r.id) LIMIT $2)`, c.Evidence, size)
				return map[string]int64{"replays": tag.RowsAffected()}, from, tag.RowsAffected() < int64(size), err
			}},
	)
	return steps
}

// oldReplays selects the replays a purge may remove: created before the
// cutoff ($1) and no longer running.
const oldReplays = `SELECT id FROM intake.replays WHERE created_at < $1 AND state <> 'running'`

// byTime is the step for a table whose rows go by a time column with a
// btree index: the oldest size rows at or after from, in the index's
// order. filter ($3 = arg) narrows it; it may name the row as t.
func byTime(table, what, pk, col string, cutoff time.Time, filter string, arg any) purgeStep {
	return purgeStep{table: table, what: what,
		count:     `SELECT '` + table + `', count(*) FROM intake.` + table + ` t WHERE ` + col + ` < $1 AND $2::int IS NULL ` + filter,
		countArgs: []any{cutoff, nil, arg},
		batch: func(ctx context.Context, tx pgx.Tx, from time.Time, size int) (map[string]int64, time.Time, bool, error) {
			var n int64
			var last *time.Time
			err := tx.QueryRow(ctx, `WITH d AS (DELETE FROM intake.`+table+` WHERE `+pk+` IN (
					SELECT `+strings.Trim(pk, "()")+` FROM intake.`+table+` t WHERE `+col+` < $1 `+filter+` AND `+col+` >= $4
					ORDER BY `+col+` LIMIT $2)
				RETURNING `+col+`) SELECT count(*), max(`+col+`) FROM d`, cutoff, size, arg, from).Scan(&n, &last)
			counts := map[string]int64{table: n}
			if err != nil || last == nil {
				return counts, from, true, err
			}
			// Fewer than size rows came back: the rest (if any) was not
			// past the filter, and nothing older is left.
			return counts, *last, n < int64(size), nil
		}}
}

// inboxStep purges the inbox rows of one status whose last delivery is
// before cutoff, with their delivery history and executions.
func inboxStep(status string, cutoff time.Time, filter string, arg any, label string) purgeStep {
	return purgeStep{table: "inbox", what: status + label,
		count: `WITH k AS (SELECT integration, account, event_id FROM intake.inbox t
				WHERE status = $2 AND last_received_at < $1 ` + filter + `)
			SELECT 'inbox', count(*) FROM k
			UNION ALL SELECT 'deliveries', count(*) FROM intake.deliveries d JOIN k USING (integration, account, event_id)
			UNION ALL SELECT 'executions', count(*) FROM intake.executions e JOIN k USING (integration, account, event_id)`,
		countArgs: []any{cutoff, status, arg},
		batch: func(ctx context.Context, tx pgx.Tx, from time.Time, size int) (map[string]int64, time.Time, bool, error) {
			return purgeInbox(ctx, tx, status, from, cutoff, size, filter, arg)
		}}
}

// purgeInbox deletes the oldest (up to size) inbox rows of status whose
// last delivery is at or after from and before cutoff, and their delivery
// history and executions: an event's history goes with it, so a kept
// event's delivery_count (recounted from its history) stays exact. It takes
// the same per-key advisory locks as the claim and the receipt fold
// (lockKeys, in hash order) before it deletes, and checks each row again
// under them: a delivery that reached a key first keeps it (its
// last_received_at moved), one that comes after finds no row and is a new
// event. A claim waits at most for one batch; lock_timeout bounds the
// purge's own wait for a busy key.
func purgeInbox(ctx context.Context, tx pgx.Tx, status string, from, cutoff time.Time, size int, filter string, arg any) (map[string]int64, time.Time, bool, error) {
	// status is one value, so inbox_status_idx (status, last_received_at)
	// returns the rows in order and the LIMIT stops the scan.
	rows, err := tx.Query(ctx, `SELECT integration, account, event_id, last_received_at FROM intake.inbox t
		WHERE status = $2 AND last_received_at < $1 `+filter+` AND last_received_at >= $4
		ORDER BY last_received_at LIMIT `+fmt.Sprint(size), cutoff, status, arg, from)
	if err != nil {
		return nil, from, true, err
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
		return nil, from, true, err
	}
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
		return nil, from, true, err
	}
	if err := lockKeys(ctx, tx, keys); err != nil {
		return nil, from, true, err
	}
	rows, err = tx.Query(ctx, `DELETE FROM intake.inbox i
		USING unnest($3::text[], $4::text[], $5::text[]) AS t(integration, account, event_id)
		WHERE (i.integration, i.account, i.event_id) = (t.integration, t.account, t.event_id)
		  AND i.status = $2 AND i.last_received_at < $1
		RETURNING i.integration, i.account, i.event_id`, cutoff, status, integ, acct, id)
	if err != nil {
		return nil, from, true, err
	}
	var gi, ga, ge []string
	_, err = pgx.ForEachRow(rows, []any{&k.Integration, &k.Account, &k.EventID}, func() error {
		gi, ga, ge = append(gi, k.Integration), append(ga, k.Account), append(ge, k.EventID)
		return nil
	})
	if err != nil {
		return nil, from, true, err
	}
	counts := map[string]int64{"inbox": int64(len(gi))}
	if len(gi) > 0 {
		for _, table := range []string{"deliveries", "executions"} {
			tag, err := tx.Exec(ctx, `DELETE FROM intake.`+table+` x
				USING unnest($1::text[], $2::text[], $3::text[]) AS t(integration, account, event_id)
				WHERE (x.integration, x.account, x.event_id) = (t.integration, t.account, t.event_id)`, gi, ga, ge)
			if err != nil {
				return nil, from, true, err
			}
			counts[table] = tag.RowsAffected()
		}
	}
	return counts, from, len(keys) < size, nil
}

// PurgeCount is a dry run: what a purge with c would remove now, per step
// and table, those with nothing to remove left out.
func (s *Store) PurgeCount(ctx context.Context, c Cutoffs) ([]Purged, error) {
	var out []Purged
	for _, st := range purgeSteps(c) {
		rows, err := s.pool.Query(ctx, st.count, st.countArgs...)
		if err != nil {
			return nil, fmt.Errorf("store: count %s past retention: %w", st.what, err)
		}
		var table string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&table, &n}, func() error {
			if n > 0 {
				out = append(out, Purged{Table: table, What: st.what, Rows: n})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("store: count %s past retention: %w", st.what, err)
		}
	}
	return out, nil
}

// Purge removes every row past its cutoff, step by step in batches of
// about size rows (a transaction each), while lease holds (nil: no lease
// to keep), and returns what it removed per step and table. A step whose
// batch fails is left for the next pass and the others still run: the
// error returned joins the failures. ctx's end stops the pass.
func (s *Store) Purge(ctx context.Context, c Cutoffs, size int, lease *PurgeLease) ([]Purged, error) {
	var out []Purged
	var errs []error
	for _, st := range purgeSteps(c) {
		totals := map[string]int64{}
		var order []string
		var from time.Time
		start := time.Now()
		var stepErr error
		for {
			if lease != nil {
				if stepErr = lease.Renew(ctx); stepErr != nil {
					break
				}
			}
			var n map[string]int64
			var done bool
			stepErr = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				var err error
				n, from, done, err = st.batch(ctx, tx, from, size)
				return err
			})
			if stepErr != nil {
				break
			}
			for table, rows := range n {
				if _, ok := totals[table]; !ok {
					order = append(order, table)
				}
				totals[table] += rows
			}
			if done {
				break
			}
		}
		for _, table := range sortedTables(order) {
			if totals[table] > 0 {
				out = append(out, Purged{Table: table, What: st.what, Rows: totals[table], Took: time.Since(start)})
			}
		}
		if stepErr != nil {
			errs = append(errs, fmt.Errorf("store: purge %s: %w", st.what, stepErr))
			if ctx.Err() != nil || errors.Is(stepErr, ErrPurgeLeaseLost) {
				break
			}
		}
	}
	return out, errors.Join(errs...)
}

// sortedTables puts the inbox first, then the tables in the order seen.
func sortedTables(order []string) []string {
	out := make([]string, 0, len(order))
	for _, t := range order {
		if t == "inbox" {
			out = append([]string{t}, out...)
		} else {
			out = append(out, t)
		}
	}
	return out
}

// PurgeLease is the right to run the purge: one runner at a time across
// every processor on the database. It is a row (intake.purge_lease) with
// an expiry, not a session lock, so it holds behind a transaction-mode
// pooler too. The holder renews it between batches; a holder that dies
// or stalls loses it when it expires, and a holder that finds it taken
// over stops.
type PurgeLease struct {
	s      *Store
	holder string
	ttl    time.Duration
}

// PurgeLeaseTTL is how long a lease outlives its last renewal.
const PurgeLeaseTTL = 2 * time.Minute

// ErrPurgeLeaseLost is a pass that found its lease expired and taken.
var ErrPurgeLeaseLost = errors.New("store: the purge lease expired and another runner took it")

// LeasePurge takes the purge lease for holder without waiting; nil (and no
// error) means another runner holds it.
func (s *Store) LeasePurge(ctx context.Context, holder string) (*PurgeLease, error) {
	var got string
	err := s.pool.QueryRow(ctx, `INSERT INTO intake.purge_lease AS l (one, holder, expires_at)
		VALUES (true, $1, now() + $2::interval)
		ON CONFLICT (one) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE l.expires_at < now() OR l.holder = excluded.holder
		RETURNING holder`, holder, PurgeLeaseTTL).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: lease purge: %w", err)
	}
	return &PurgeLease{s: s, holder: holder, ttl: PurgeLeaseTTL}, nil
}

// Renew extends the lease; ErrPurgeLeaseLost when it is no longer held.
func (l *PurgeLease) Renew(ctx context.Context) error {
	tag, err := l.s.pool.Exec(ctx, `UPDATE intake.purge_lease SET expires_at = now() + $2::interval
		WHERE holder = $1 AND expires_at >= now()`, l.holder, l.ttl)
	if err != nil {
		return fmt.Errorf("store: renew the purge lease: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrPurgeLeaseLost
	}
	return nil
}

// Release gives the lease up (it expires by itself if this fails).
func (l *PurgeLease) Release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = l.s.pool.Exec(ctx, `UPDATE intake.purge_lease SET expires_at = now() - interval '1 microsecond' WHERE holder = $1`, l.holder)
}

// TableStats is one table's size and its oldest rows, as the purge's
// metrics report them.
type TableStats struct {
	Table string
	Bytes int64 // with indexes and TOAST
	// Oldest is the age of the table's oldest row; nil when it is empty,
	// and for the delivery history (no index serves it: its rows go with
	// their inbox rows, which say).
	Oldest *time.Duration
	// Overdue is how far past its cutoff the oldest row the purge should
	// have removed is: 0 when the purge has kept up. For the delivery
	// history, of the receipts of events the inbox does not hold; for the
	// inbox and the replay guard, of the integrations without an
	// inbox_retention of their own.
	Overdue time.Duration
}

// retentionTables are the purged tables with their time column, the rows
// a cutoff applies to, and the cutoff. Each has a btree on the column for
// those rows, so the overdue row is one probe; oldest says whether one
// serves the whole table's minimum too (not the history: its index holds
// only the receipts of events never claimed).
var retentionTables = []struct {
	table, col string
	scope      string // predicate on the overdue rows (t is the row)
	oldest     bool
	cutoff     func(Cutoffs) time.Time
}{
	{"inbox", "last_received_at", `status IN ('processed', 'stale') AND integration <> ALL($2)`, true, func(c Cutoffs) time.Time { return c.Inbox }},
	{"body_hashes", "first_seen_at", `integration <> ALL($2)`, true, func(c Cutoffs) time.Time { return c.Inbox }},
	{"body_type_hashes", "first_seen_at", `integration <> ALL($2)`, true, func(c Cutoffs) time.Time { return c.Inbox }},
	{"deliveries", "received_at", `answer <> 'accepted' AND ` + notInInbox, false, func(c Cutoffs) time.Time { return c.History }}, // envelope.AnswerAccepted
	{"ingress_refusals", "window_end", "", true, func(c Cutoffs) time.Time { return c.History }},
	{"conflicts", "detected_at", "", true, func(c Cutoffs) time.Time { return c.Evidence }},
	{"rejected_messages", "rejected_at", "", true, func(c Cutoffs) time.Time { return c.Evidence }},
	{"replays", "created_at", `state <> 'running'`, true, func(c Cutoffs) time.Time { return c.Evidence }},
}

// RetentionStats reads each purged table's size, oldest row and overdue
// rows against c at now.
func (s *Store) RetentionStats(ctx context.Context, c Cutoffs, now time.Time) ([]TableStats, error) {
	others := make([]string, 0, len(c.InboxFor))
	for in := range c.InboxFor {
		others = append(others, in)
	}
	out := make([]TableStats, 0, len(retentionTables))
	for _, t := range retentionTables {
		st := TableStats{Table: t.table}
		scope := " AND $2::text[] IS NOT NULL"
		if t.scope != "" {
			scope += " AND " + t.scope
		}
		oldest := `NULL::timestamptz`
		switch {
		case t.table == "inbox":
			// One probe per status: inbox_status_idx leads with it.
			oldest = `(SELECT min(m) FROM (
				SELECT min(last_received_at) AS m FROM intake.inbox WHERE status = 'processed'
				UNION ALL SELECT min(last_received_at) FROM intake.inbox WHERE status = 'stale'
				UNION ALL SELECT min(last_received_at) FROM intake.inbox WHERE status = 'failed'
				UNION ALL SELECT min(last_received_at) FROM intake.inbox WHERE status = 'quarantined') AS s)`
		case t.oldest:
			oldest = `(SELECT min(` + t.col + `) FROM intake.` + t.table + `)`
		}
		// The overdue row: the oldest past the cutoff in the scope, walked
		// from the old end of the time index.
		q := `SELECT pg_total_relation_size('intake.` + t.table + `'),
			(SELECT ` + t.col + ` FROM intake.` + t.table + ` t WHERE ` + t.col + ` < $1` + scope + ` ORDER BY ` + t.col + ` LIMIT 1), ` + oldest
		var overdueAt, oldestAt *time.Time
		if err := s.pool.QueryRow(ctx, q, t.cutoff(c), others).Scan(&st.Bytes, &overdueAt, &oldestAt); err != nil {
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

// notInInbox keeps the rows of events the inbox still holds (t is the
// row) out of a history step and its overdue figure.
const notInInbox = `NOT EXISTS (SELECT 1 FROM intake.inbox i
	WHERE i.integration = t.integration AND i.account = t.account AND i.event_id = t.event_id)`
