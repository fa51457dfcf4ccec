package store

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/internal/testenv"
)

// A mark reads outbox_pending through its primary key, however many dead
// rows the table holds: on a table bloated by churn (autovacuum off here, a
// few hundred thousand rows inserted and deleted, a few thousand live), the
// plan of a full chunk has no sequential scan. The plan is checked, not
// timed.
func TestMarkPublishedProbesThePrimaryKey(t *testing.T) {
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
