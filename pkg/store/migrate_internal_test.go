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

// Migration 00017 on a database that holds guard records, with a 0.16
// processor still running: body_hashes keeps its shape, its primary key and
// its rows; 0.16's own guard statements (store.FirstKeys and KeepFirstKey of
// 0.16, verbatim) still run, and the body they record guards every type for
// 0.17's FirstKeys, which records no type of it; a body without such a row
// gets one record per type. Replays admit nothing. The way down drops the
// per-type records and nothing else.
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
	query := func(q string, args ...any) string {
		t.Helper()
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, " ")
	}
	// What 0.16 is: its table, and its processor's two statements
	// (git show <0.16>:pkg/store/bodyhashes.go).
	shape := func() string {
		return query(`SELECT column_name || ':' || data_type FROM information_schema.columns
			WHERE table_schema = 'intake' AND table_name = 'body_hashes' ORDER BY ordinal_position`) + " / " +
			query(`SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
				WHERE conrelid = 'intake.body_hashes'::regclass ORDER BY conname`) + " / " +
			query(`SELECT indexname FROM pg_indexes WHERE schemaname = 'intake' AND tablename = 'body_hashes' ORDER BY 1`)
	}
	firstKeys016 := func(integ, sha, acct, id string) {
		t.Helper()
		exec(`
		INSERT INTO intake.body_hashes (integration, payload_sha256, account, event_id)
		SELECT t.integration, t.sha, t.account, t.event_id
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) AS t(integration, sha, account, event_id, seq)
		ORDER BY t.integration, t.sha, t.seq
		ON CONFLICT (integration, payload_sha256) DO NOTHING`, []string{integ}, []string{sha}, []string{acct}, []string{id}, []int64{1})
	}
	keepFirstKey016 := func(integ, sha, acct, id string) {
		t.Helper()
		exec(`INSERT INTO intake.body_hashes (integration, payload_sha256, account, event_id)
		VALUES ($1, $2, $3, $4) ON CONFLICT (integration, payload_sha256) DO NOTHING`, integ, sha, acct, id)
	}
	exec(`INSERT INTO intake.body_hashes (integration, payload_sha256, account, event_id, first_seen_at)
		VALUES ('shop', 'b1', 'main', 'old-1', now() - interval '2 days'), ('shop', 'b2', 'main', 'old-2', now() - interval '2 days')`)
	exec(`INSERT INTO intake.replays (id, requested_by, selector, mode, reason, dry_run, rate, state)
		VALUES (gen_random_uuid(), 'ops', '{}', 'exact', '', true, 10, 'done')`)
	before := shape()

	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	if after := shape(); after != before {
		t.Fatalf("body_hashes after the migration: %s\nbefore: %s", after, before)
	}
	if got := query(`SELECT payload_sha256 || '=' || event_id FROM intake.body_hashes ORDER BY 1`); got != "b1=old-1 b2=old-2" {
		t.Fatalf("body_hashes after the migration: %s, want the 2 rows recorded before it", got)
	}
	if got := query(`SELECT count(*)::text FROM intake.replays WHERE NOT admit_replayed_bodies`); got != "1" {
		t.Fatalf("%s replays admitting nothing, want 1", got)
	}
	// A 0.16 processor during the roll: a new body (b3), by either
	// statement, and copies of recorded ones, which change nothing.
	firstKeys016("shop", "b3", "main", "roll-3")
	keepFirstKey016("shop", "b3", "main", "roll-3-copy")
	firstKeys016("shop", "b1", "main", "roll-1-copy")
	keepFirstKey016("shop", "b4", "main", "roll-4")
	if got := query(`SELECT payload_sha256 || '=' || event_id FROM intake.body_hashes ORDER BY 1`); got != "b1=old-1 b2=old-2 b3=roll-3 b4=roll-4" {
		t.Fatalf("body_hashes after 0.16's statements: %s", got)
	}

	// 0.17: a body of body_hashes has that first key under every type;
	// b5 has none and gets one per type, the lower stream sequence first.
	st, err := Open(ctx, dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	claim := func(sha, typ, id string, seq uint64) BodyClaim {
		return BodyClaim{Key: envelope.Key{Integration: "shop", Account: "main", EventID: id}, EventType: typ, PayloadSHA256: sha, StreamSeq: seq}
	}
	claims := []BodyClaim{
		claim("b1", "orders/create", "new-1", 1), claim("b3", "orders/updated", "new-3", 2), claim("b4", "", "new-4", 3),
		claim("b5", "orders/updated", "new-5u", 4), claim("b5", "orders/create", "new-5c", 5), claim("b5", "orders/create", "copy-5c", 6),
	}
	want := "old-1 roll-3 roll-4 new-5u new-5c new-5c"
	ids := func(keys []envelope.Key) string {
		var s []string
		for _, k := range keys {
			s = append(s, k.EventID)
		}
		return strings.Join(s, " ")
	}
	var first []envelope.Key
	if err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		first, err = FirstKeys(ctx, tx, claims)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := ids(first); got != want {
		t.Fatalf("FirstKeys: %s, want %s", got, want)
	}
	if err := KeepFirstKey(ctx, st.Pool(), envelope.Key{Integration: "shop", Account: "main", EventID: "kept-2"}, "orders/create", "b2"); err != nil {
		t.Fatal(err)
	}
	if got := query(`SELECT payload_sha256 || ':' || event_type || '=' || event_id FROM intake.body_type_hashes ORDER BY 1`); got != "b5:orders/create=new-5c b5:orders/updated=new-5u" {
		t.Fatalf("body_type_hashes: %s, want b5's two types alone (the others have a body_hashes row)", got)
	}
	if first, err = st.BodyFirstKeys(ctx, claims); err != nil || ids(first) != want {
		t.Fatalf("BodyFirstKeys: %s, %v; want %s", ids(first), err, want)
	}

	if _, err := p.DownTo(ctx, 16); err != nil {
		t.Fatalf("down to 16: %v", err)
	}
	if got := query(`SELECT count(*)::text FROM information_schema.tables WHERE table_schema = 'intake' AND table_name = 'body_type_hashes'`); got != "0" {
		t.Fatalf("body_type_hashes after down: %s tables", got)
	}
	if got := query(`SELECT count(*)::text FROM information_schema.columns WHERE table_schema = 'intake' AND table_name = 'replays' AND column_name = 'admit_replayed_bodies'`); got != "0" {
		t.Fatalf("replays.admit_replayed_bodies after down: %s columns", got)
	}
	if after := shape(); after != before {
		t.Fatalf("body_hashes after down: %s\nbefore: %s", after, before)
	}
	if got := query(`SELECT payload_sha256 || '=' || event_id FROM intake.body_hashes ORDER BY 1`); got != "b1=old-1 b2=old-2 b3=roll-3 b4=roll-4" {
		t.Fatalf("body_hashes after down: %s", got)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
