package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/envelope"
)

// Every migration's Down undoes its Up: down to nothing and up again.
func TestMigrationsGoDownAndUpAgain(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.Postgres(t)
	if err := Migrate(ctx, dbURL, nil); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := newMigrator(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("down: %v", err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
}

// The outbox's move to daily partitions (00013–00015) on a database that
// holds rows: every row stays, in outbox_legacy, pending ones are still
// claimed, the sequence goes on, new rows land in the partition of their
// day, and the way down puts every row back in one table.
func TestOutboxPartitioningOnAPopulatedDatabase(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.Postgres(t)
	// Bounds go to text and back: the migration runs in a session whose
	// dates read otherwise (day first, a zone whose abbreviation means
	// another zone elsewhere).
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	db, err := sql.Open("pgx", dbURL+sep+"DateStyle=SQL%2C%20DMY&TimeZone=Asia%2FKolkata")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+Schema); err != nil {
		t.Fatal(err)
	}
	p, err := newMigrator(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 12); err != nil {
		t.Fatal(err)
	}
	const rows, pending = 20000, 500
	// Rows of the last four days, the newest pending, as a running
	// system would leave them.
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO intake.outbox (id, integration, account, event_id, subject, payload, created_at)
		SELECT gen_random_uuid(), 'demo', 'main', 'e' || g, 'intake.out.t.demo.x', convert_to('{"n":' || g || '}', 'UTF8'),
			now() - (($1 - g) * interval '4 days') / $1
		FROM generate_series(1, $1) g`, rows)
	exec(`INSERT INTO intake.outbox_pending (id, created_at)
		SELECT id, created_at FROM intake.outbox ORDER BY seq DESC LIMIT $1`, pending)
	var maxSeq int64
	if err := db.QueryRowContext(ctx, `SELECT max(seq) FROM intake.outbox`).Scan(&maxSeq); err != nil {
		t.Fatal(err)
	}

	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up on a populated outbox: %v", err)
	}
	var kind string
	var n, inLegacy int
	if err := db.QueryRowContext(ctx, `SELECT relkind::text FROM pg_class WHERE oid = 'intake.outbox'::regclass`).Scan(&kind); err != nil || kind != "p" {
		t.Fatalf("intake.outbox relkind %q, %v; want p (partitioned)", kind, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE tableoid = 'intake.outbox_legacy'::regclass) FROM intake.outbox`).Scan(&n, &inLegacy); err != nil {
		t.Fatal(err)
	}
	if n != rows || inLegacy != rows {
		t.Fatalf("after the migration: %d rows, %d in outbox_legacy; want %d, all there", n, inLegacy, rows)
	}

	st, err := Open(ctx, dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	until, err := st.OutboxPartitionsUntil(ctx)
	if err != nil || until.Before(time.Now().Add(OutboxDaysAhead*24*time.Hour)) {
		t.Fatalf("partitions until %s, %v; want %d days ahead", until, err, OutboxDaysAhead)
	}
	// The pending rows are claimed as before, in their order.
	var claimed []OutboxRow
	if err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		claimed, err = ClaimOutbox(ctx, tx, 2*pending, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(claimed) != pending || claimed[len(claimed)-1].Key.EventID != fmt.Sprintf("e%d", rows) {
		t.Fatalf("claimed %d rows, last %+v; want the %d pending, e%d last", len(claimed), claimed[len(claimed)-1].Key, pending, rows)
	}
	// A new row: the next seq, in the partition of its day.
	k := envelope.Key{Integration: "demo", Account: "main", EventID: "after"}
	w := BatchWrites{Outbox: []OutboxRow{{Key: k, Subject: "intake.out.t.demo.x", Payload: []byte(`{}`)}}}
	if err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error { return w.Flush(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
	var seq int64
	if err := st.Pool().QueryRow(ctx, `SELECT seq FROM intake.outbox WHERE event_id = 'after'`).Scan(&seq); err != nil || seq != maxSeq+1 {
		t.Fatalf("new row's seq %d, %v; want %d", seq, err, maxSeq+1)
	}
	later := time.Now().Add(72 * time.Hour).UTC()
	var part string
	if err := st.Pool().QueryRow(ctx, `UPDATE intake.outbox SET created_at = $1 WHERE event_id = 'after' RETURNING tableoid::regclass::text`, later).Scan(&part); err != nil ||
		part != "intake.outbox_p"+later.Format("20060102") {
		t.Fatalf("a row of %s lands in %q, %v", later.Format(time.DateOnly), part, err)
	}
	st.Close()

	if _, err := p.DownTo(ctx, 12); err != nil {
		t.Fatalf("down to 12: %v", err)
	}
	if err := db.QueryRowContext(ctx, `SELECT relkind::text FROM pg_class WHERE oid = 'intake.outbox'::regclass`).Scan(&kind); err != nil || kind != "r" {
		t.Fatalf("after down: relkind %q, %v; want r", kind, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM intake.outbox`).Scan(&n); err != nil || n != rows+1 {
		t.Fatalf("after down: %d rows, %v; want %d", n, err, rows+1)
	}
}

// Migration 00017 on a database that holds guard records: they stay, with
// event_type ” (guarding every type), replays admit nothing, and rows of
// two types of one body may follow; the way down keeps one row per body,
// the earliest.
func TestReplayGuardTypeMigration(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.Postgres(t)
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+Schema); err != nil {
		t.Fatal(err)
	}
	p, err := newMigrator(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	exec(`INSERT INTO intake.body_hashes (integration, payload_sha256, account, event_id, first_seen_at)
		VALUES ('shop', 'b1', 'main', 'old-1', now() - interval '2 days'), ('shop', 'b2', 'main', 'old-2', now() - interval '2 days')`)
	exec(`INSERT INTO intake.replays (id, requested_by, selector, mode, reason, dry_run, rate, state)
		VALUES (gen_random_uuid(), 'ops', '{}', 'exact', '', true, 10, 'done')`)

	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	if n := count(`SELECT count(*) FROM intake.body_hashes WHERE event_type = ''`); n != 2 {
		t.Fatalf("%d rows with event_type '' after the migration, want the 2 recorded before it", n)
	}
	if n := count(`SELECT count(*) FROM intake.replays WHERE NOT admit_replayed_bodies`); n != 1 {
		t.Fatalf("%d replays admitting nothing, want 1", n)
	}
	// b1 gains rows of two types (newer); b3 is new, of two types, the
	// later type recorded first.
	exec(`INSERT INTO intake.body_hashes (integration, payload_sha256, event_type, account, event_id, first_seen_at) VALUES
		('shop', 'b1', 'orders/create', 'main', 'new-1', now() - interval '1 day'),
		('shop', 'b3', 'orders/updated', 'main', 'first-3', now() - interval '1 hour'),
		('shop', 'b3', 'orders/create', 'main', 'second-3', now())`)

	if _, err := p.DownTo(ctx, 16); err != nil {
		t.Fatalf("down to 16: %v", err)
	}
	rows, err := db.QueryContext(ctx, `SELECT payload_sha256, event_id FROM intake.body_hashes ORDER BY payload_sha256`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var sha, id string
		if err := rows.Scan(&sha, &id); err != nil {
			t.Fatal(err)
		}
		got = append(got, sha+"="+id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := "b1=old-1 b2=old-2 b3=first-3"; strings.Join(got, " ") != want {
		t.Fatalf("after down: %v, want %s (one row per body, the earliest)", got, want)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
