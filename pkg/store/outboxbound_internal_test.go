package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"

	"github.com/intakehq/intake/internal/harness/testenv"
)

// migratedTo opens dbURL and applies the migrations up to version.
func migratedTo(t *testing.T, dbURL string, version int64) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("CREATE SCHEMA " + Schema); err != nil {
		t.Fatal(err)
	}
	p, err := newMigrator(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
	return db
}

func dbVersion(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRow(`SELECT max(version_id) FROM intake.schema_migrations WHERE is_applied`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// insertOutboxAt inserts an outbox row as a processor of the release before
// 00015 does, created at at.
func insertOutboxAt(db *sql.DB, id string, at time.Time) error {
	_, err := db.Exec(`INSERT INTO intake.outbox (integration, account, event_id, subject, payload, created_at)
		VALUES ('demo', 'main', $1, 'intake.out.t.demo.x', '\x7b7d', $2)`, id, at)
	return err
}

// A rollout that stops after 00013 (the Job killed during 00014's scan)
// leaves a deadline: once 00013's bound passes, the previous release's
// outbox inserts fail (23514) and processing stalls. Running `intake
// migrate` again finishes the chain and the outbox takes rows of any time.
func TestRolloutStoppedAfterTheOutboxBoundRecoversOnTheNextMigrate(t *testing.T) {
	dbURL := testenv.Postgres(t)
	db := migratedTo(t, dbURL, outboxBoundVersion)
	if err := insertOutboxAt(db, "now", time.Now()); err != nil {
		t.Fatalf("a row of now after 00013: %v", err)
	}
	// Three days on, as the stalled release would write it.
	later := time.Now().Add(72 * time.Hour)
	var pgErr *pgconn.PgError
	if err := insertOutboxAt(db, "later", later); !errors.As(err, &pgErr) || pgErr.Code != "23514" {
		t.Fatalf("a row past 00013's bound: %v; want a check violation (the deadline this test is about)", err)
	}
	if err := Migrate(context.Background(), dbURL, nil); err != nil {
		t.Fatalf("intake migrate again: %v", err)
	}
	if err := insertOutboxAt(db, "later", later); err != nil {
		t.Fatalf("a row past the old bound after the chain finished: %v", err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM intake.outbox`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d outbox rows, %v; want 2", n, err)
	}
}

// A Migrate run that fails after applying 00013 undoes it, so the stopped
// rollout leaves no deadline behind. 00014 is made to fail here by a row
// already past the bound (its validation finds it); a Job killed during
// the scan fails it the same way, with the context cancelled.
func TestMigrateUndoesTheOutboxBoundWhenTheChainStopsAfterIt(t *testing.T) {
	dbURL := testenv.Postgres(t)
	db := migratedTo(t, dbURL, outboxBoundVersion-1)
	if err := insertOutboxAt(db, "future", time.Now().Add(10*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	err := Migrate(context.Background(), dbURL, nil)
	if err == nil {
		t.Fatal("migrate with a row past the bound succeeded; the test needs 00014 to fail")
	}
	if v := dbVersion(t, db); v != outboxBoundVersion-1 {
		t.Fatalf("after the failed run the database is at %d (err %v); want %d: 00013 undone", v, err, outboxBoundVersion-1)
	}
	if err := insertOutboxAt(db, "later", time.Now().Add(72*time.Hour)); err != nil {
		t.Fatalf("a row three days on after the failed run: %v (the bound was left behind)", err)
	}
	// Rows of the future (made here to fail the scan) stand in the way of
	// any bound; a running system writes rows of now.
	if _, err := db.Exec(`DELETE FROM intake.outbox WHERE created_at > now()`); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(context.Background(), dbURL, nil); err != nil {
		t.Fatalf("migrate again: %v", err)
	}
}

// The migration chain on a large outbox, timed per migration: opt-in, by
// INTAKE_MIGRATION_ROWS (rows of ~1 KiB, made before 00013). The figures
// in docs/upgrading.md came from it:
//
//	INTAKE_MIGRATION_ROWS=3000000 [INTAKE_MIGRATION_DROP_CACHES=1] go test -run TestMigrationChainOnALargeOutbox -v -timeout 60m ./pkg/store/
//
// INTAKE_MIGRATION_DROP_CACHES=1 (as root) empties the page cache first,
// so that 00014's scan reads from disk.
func TestMigrationChainOnALargeOutbox(t *testing.T) {
	rows, _ := strconv.Atoi(os.Getenv("INTAKE_MIGRATION_ROWS"))
	if rows <= 0 {
		t.Skip("set INTAKE_MIGRATION_ROWS to time the migrations on that many outbox rows")
	}
	ctx := context.Background()
	dbURL := testenv.Postgres(t)
	db := migratedTo(t, dbURL, outboxBoundVersion-1)
	start := time.Now()
	const chunk = 200000
	for done := 0; done < rows; done += chunk {
		n := min(chunk, rows-done)
		// 1 KiB of hex from md5s: about as compressible as JSON (lz4).
		if _, err := db.ExecContext(ctx, `INSERT INTO intake.outbox (integration, account, event_id, subject, payload, created_at)
			SELECT 'demo', 'main', 'e' || g, 'intake.out.t.demo.invoice.paid',
				convert_to(repeat(md5(g::text), 32), 'UTF8'), now() - ($3 - g) * interval '1 second'
			FROM generate_series($1::int, $2::int) g`, done+1, done+n, rows); err != nil {
			t.Fatal(err)
		}
	}
	var size string
	if err := db.QueryRowContext(ctx, `SELECT pg_size_pretty(pg_total_relation_size('intake.outbox'))`).Scan(&size); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d outbox rows, %s with indexes, made in %s", rows, size, time.Since(start).Round(time.Second))
	if os.Getenv("INTAKE_MIGRATION_DROP_CACHES") == "1" {
		// Cold: the kernel's page cache emptied (root only), so 00014
		// reads the table from disk as after a restart.
		if _, err := db.ExecContext(ctx, `CHECKPOINT`); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
			t.Fatalf("INTAKE_MIGRATION_DROP_CACHES: %v", err)
		}
	}
	p, err := newMigrator(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := p.UpByOne(ctx)
		if err != nil {
			if errors.Is(err, goose.ErrNoNextVersion) {
				break
			}
			t.Fatal(err)
		}
		t.Logf("%s took %s", r.Source.Path, r.Duration.Round(time.Millisecond))
	}
}
