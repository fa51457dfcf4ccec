package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/internal/harness/testenv"
)

// A mark reads outbox_pending through its primary key, however many dead
// rows the table holds: on a table bloated by churn (autovacuum off here, a
// few hundred thousand rows inserted and deleted, a few thousand live), the
// plan of a full chunk has no sequential scan. The plan is checked, not
// timed.
func TestMarkPublishedProbesThePrimaryKey(t *testing.T) {
	ctx := context.Background()
	st := migratedStore(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := st.Pool().Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`ALTER TABLE intake.outbox_pending SET (autovacuum_enabled = off)`)
	exec(`INSERT INTO intake.outbox_pending (id) SELECT gen_random_uuid() FROM generate_series(1, 200000)`)
	exec(`DELETE FROM intake.outbox_pending`)
	ids := make([]string, 4*markChunk)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7()).String()
	}
	raw, err := uuidBytes(ids)
	if err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO intake.outbox_pending (id) SELECT unnest($1::uuid[])`, raw)
	exec(`ANALYZE intake.outbox_pending`)

	var plan []string
	err = pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, markPlanSQL); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `EXPLAIN `+markPublishedSQL, raw[:markChunk])
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "Seq Scan") || strings.Count(text, "outbox_pending_pkey") != 2 {
		t.Fatalf("mark plan should probe outbox_pending_pkey on both sides, without a sequential scan:\n%s", text)
	}

	if err := st.MarkPublished(ctx, ids); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM intake.outbox_pending`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d of %d ids still pending after MarkPublished", left, len(ids))
	}
}

// A claim is never compiled with LLVM, whatever the planner estimates.
// The estimate that made it so in issue 22's soak comes from a large outbox
// (the join's rows follow the table, not the claim); here the thresholds
// are set to 0 instead, which any plan passes. The control, without
// claimPlanSQL, shows the same statement is compiled at these thresholds,
// so the check cannot pass for want of JIT.
func TestClaimOutboxIsNeverCompiled(t *testing.T) {
	ctx := context.Background()
	st := migratedStore(t)
	var available bool
	if err := st.Pool().QueryRow(ctx, `SELECT pg_jit_available()`).Scan(&available); err != nil {
		t.Fatal(err)
	}
	if !available {
		t.Skip("this Postgres has no JIT provider: nothing to compile")
	}
	if _, err := st.Pool().Exec(ctx, `
		INSERT INTO intake.outbox (integration, account, event_id, subject, headers, payload)
		VALUES ('i', 'a', 'evt_1', 'intake.out.i.t', '{}', '{}');
		INSERT INTO intake.outbox_pending (id, created_at) SELECT id, created_at - interval '1 minute' FROM intake.outbox`); err != nil {
		t.Fatal(err)
	}
	const cheap = `SELECT set_config('jit_above_cost', '0', true), set_config('jit_inline_above_cost', '0', true),
		set_config('jit_optimize_above_cost', '0', true)`
	// compiled says whether the claim's statement, after setup, runs JIT.
	compiled := func(setup ...string) bool {
		t.Helper()
		var plan string
		err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
			for _, s := range append([]string{cheap}, setup...) {
				if _, err := tx.Exec(ctx, s); err != nil {
					return err
				}
			}
			if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+claimOutboxSQL, 10, time.Duration(0)).Scan(&plan); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatal(err)
		}
		return strings.Contains(plan, `"JIT"`)
	}
	if !compiled() {
		t.Fatal("control: the claim was not compiled with every JIT threshold at 0; the check below would prove nothing")
	}
	if compiled(claimPlanSQL) {
		t.Fatal("the claim was compiled with LLVM after claimPlanSQL")
	}

	// And the claim itself still claims at those thresholds.
	var rows []OutboxRow
	err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, cheap); err != nil {
			return err
		}
		var err error
		rows, err = ClaimOutbox(ctx, tx, 10, time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Key.EventID != "evt_1" {
		t.Fatalf("claimed %+v, want the one pending row", rows)
	}
}

// errRollback ends a test's transaction without keeping what it did.
var errRollback = errors.New("rollback")

// migratedStore opens a Store on a fresh, migrated test database.
func migratedStore(t *testing.T) *Store {
	t.Helper()
	ctx := context.Background()
	dbURL := testenv.Postgres(t)
	if err := Migrate(ctx, dbURL, nil); err != nil {
		t.Fatal(err)
	}
	st, err := Open(ctx, dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// The relay's claim and the processor's mark lock their ids once per
// statement, whatever join the planner would pick: nested loops are forced
// here (hash and merge joins, hashing and materialising off), the plan
// issue 22's soak got by itself once outbox_pending's statistics said it
// was small. The controls, the statements as they were (id IN (SELECT …
// FOR UPDATE SKIP LOCKED)), show that under these settings a locking
// subquery does run again per row (and the claim takes every pending row,
// not its limit), so the checks cannot pass for want of a nested loop.
func TestPendingDeletesLockOnce(t *testing.T) {
	ctx := context.Background()
	st := migratedStore(t)
	const pending = 2000
	if _, err := st.Pool().Exec(ctx, fmt.Sprintf(`
		INSERT INTO intake.outbox (integration, account, event_id, subject, headers, payload)
		SELECT 'i', 'a', 'evt_' || g, 'intake.out.i.t', '{}', '{}' FROM generate_series(1, %d) g;
		INSERT INTO intake.outbox_pending (id, created_at) SELECT id, created_at - interval '1 minute' FROM intake.outbox`, pending)); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, err := st.Pool().Query(ctx, `SELECT id::text FROM intake.outbox_pending ORDER BY id LIMIT $1`, markChunk)
	if err == nil {
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	raw, err := uuidBytes(ids)
	if err != nil {
		t.Fatal(err)
	}
	const nestedLoops = `SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
		set_config('enable_hashagg', 'off', true), set_config('enable_sort', 'off', true), set_config('enable_material', 'off', true)`
	const (
		claimBefore = `
		WITH c AS (
			DELETE FROM intake.outbox_pending p
			WHERE p.id IN (SELECT id FROM intake.outbox_pending WHERE created_at <= now() - $2::interval
				ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
			RETURNING p.id)
		SELECT o.id::text FROM intake.outbox o JOIN c USING (id) ORDER BY o.seq`
		markBefore = `DELETE FROM intake.outbox_pending WHERE id = ANY($1::uuid[]) AND id IN (
	SELECT id FROM intake.outbox_pending WHERE id = ANY($1::uuid[]) FOR UPDATE SKIP LOCKED)`
	)
	// locks runs sql under EXPLAIN ANALYZE after setup, rolls it back, and
	// returns how many times its row-locking node ran and how many rows
	// the statement deleted from outbox_pending.
	locks := func(setup, sql string, args ...any) (loops, deleted int) {
		t.Helper()
		var plan []byte
		err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
			for _, s := range []string{nestedLoops, setup} {
				if _, err := tx.Exec(ctx, s); err != nil {
					return err
				}
			}
			if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+sql, args...).Scan(&plan); err != nil {
				return err
			}
			var left int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM intake.outbox_pending`).Scan(&left); err != nil {
				return err
			}
			deleted = pending - left
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatal(err)
		}
		var doc []struct{ Plan planNode }
		if err := json.Unmarshal(plan, &doc); err != nil || len(doc) != 1 {
			t.Fatalf("plan %s: %v", plan, err)
		}
		return doc[0].Plan.loops("LockRows"), deleted
	}

	// The former claim, run again per pending row, also took more than its
	// limit: each run skipped the rows the statement had already deleted
	// and locked the next ones.
	const claim = 100
	if loops, deleted := locks(claimPlanSQL, claimBefore, claim, time.Second); loops <= 1 || deleted <= claim {
		t.Fatalf("control: the former claim locked in %d loop(s) and took %d rows with nested loops forced; the check below would prove nothing", loops, deleted)
	}
	if loops, deleted := locks(claimPlanSQL, claimOutboxSQL, claim, time.Second); loops != 1 || deleted != claim {
		t.Fatalf("claim: locking ran %d times (want 1), %d rows claimed (want %d)", loops, deleted, claim)
	}
	if loops, _ := locks(markPlanSQL, markBefore, raw); loops <= 1 {
		t.Fatalf("control: the former mark locked in %d loop(s) with nested loops forced; the check below would prove nothing", loops)
	}
	if loops, deleted := locks(markPlanSQL, markPublishedSQL, raw); loops != 1 || deleted != len(ids) {
		t.Fatalf("mark: locking ran %d times (want 1), %d rows marked (want %d)", loops, deleted, len(ids))
	}
}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan, with what the tests
// read of it.
type planNode struct {
	Type  string     `json:"Node Type"`
	Loops int        `json:"Actual Loops"`
	Plans []planNode `json:"Plans"`
}

// loops sums the executions of the nodes of type typ under n.
func (n planNode) loops(typ string) int {
	l := 0
	if n.Type == typ {
		l = n.Loops
	}
	for _, c := range n.Plans {
		l += c.loops(typ)
	}
	return l
}
