package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/store"
)

// TestPurgeRemovesWhatIsPastRetention fills every purged table with rows on
// both sides of their cutoffs (a clock fixed in the test: days, not
// seconds), purges in batches of two and checks that exactly the rows past
// retention went, that younger ones, running replays and evidence inside
// its time stay, and that the dry run counted what the purge removed.
func TestPurgeRemovesWhatIsPastRetention(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	ago := func(days int) time.Time { return now.Add(-time.Duration(days) * day) }
	c := store.Cutoffs{Inbox: ago(90), InboxFor: map[string]time.Time{"long": ago(180)}, History: ago(30), Evidence: ago(365)}

	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := st.Pool().Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	seq := 0
	inbox := func(integration, id, status string, last time.Time) {
		seq++
		exec(`INSERT INTO intake.inbox (integration, account, event_id, tenant, event_type, payload_sha256, status,
			first_received_at, last_received_at, stream_seq) VALUES ($1, 'a', $2, 't', 'x', 'h', $3, $4, $4, $5)`,
			integration, id, status, last, seq)
	}
	inbox("demo", "old-1", "processed", ago(91))
	inbox("demo", "old-2", "processed", ago(200))
	inbox("demo", "old-3", "stale", ago(100))
	inbox("demo", "young", "processed", ago(89))       // kept: inside retention.inbox
	inbox("demo", "failed", "failed", ago(200))        // kept: evidence
	inbox("demo", "quar", "quarantined", ago(300))     // kept: evidence
	inbox("demo", "quar-old", "quarantined", ago(400)) // past evidence
	inbox("long", "kept", "processed", ago(120))       // kept: its integration keeps 180 days
	inbox("long", "gone", "processed", ago(181))
	// The replay guard's records of both kinds (0.16's by body, 0.17's by
	// body and type) go by first sight, as the inbox.
	for i, at := range []time.Time{ago(100), ago(89), ago(200)} {
		exec(`INSERT INTO intake.body_hashes (integration, payload_sha256, account, event_id, first_seen_at)
			VALUES ('demo', $1, 'a', 'e', $2)`, fmt.Sprint("h", i), at)
	}
	for i, at := range []time.Time{ago(95), ago(10), ago(300), ago(91)} {
		exec(`INSERT INTO intake.body_type_hashes (integration, payload_sha256, event_type, account, event_id, first_seen_at)
			VALUES ('demo', 'h', $1, 'a', 'e', $2)`, fmt.Sprint("t", i), at)
	}
	exec(`INSERT INTO intake.body_type_hashes (integration, payload_sha256, event_type, account, event_id, first_seen_at)
		VALUES ('long', 'h', 't', 'a', 'e', $1)`, ago(120)) // kept: its integration keeps 180 days
	// An event's history goes with its inbox row, whatever its age: the
	// purged old-1's two rows go, the kept young one's old row stays.
	for i, h := range []struct {
		id string
		at time.Time
	}{{"old-1", ago(91)}, {"old-1", ago(10)}, {"young", ago(100)}} {
		exec(`INSERT INTO intake.deliveries (receipt_id, integration, account, event_id, received_at, instance, status_code, answer)
			VALUES ($1, 'demo', 'a', $2, $3, 'i', 200, 'accepted')`, fmt.Sprint("k", i), h.id, h.at)
		exec(`INSERT INTO intake.executions (integration, account, event_id, mode, stream_seq, executed_at)
			VALUES ('demo', 'a', $1, 'original', $2, $3)`, h.id, 100+i, h.at)
	}
	// Receipts of deliveries the inbox never held go by retention.history.
	for i, at := range []time.Time{ago(31), ago(40), ago(29), ago(1)} {
		exec(`INSERT INTO intake.deliveries (receipt_id, integration, account, event_id, received_at, instance, status_code, answer)
			VALUES ($1, 'demo', 'a', 'e', $2, 'i', 503, 'unavailable')`, fmt.Sprint("r", i), at)
	}
	for i, at := range []time.Time{ago(366), ago(364)} {
		exec(`INSERT INTO intake.conflicts (integration, account, event_id, tenant, original_sha256, conflicting_sha256,
			original_stream_seq, conflicting_stream_seq, received_at, detected_at) VALUES ('demo', 'a', 'e', 't', 'h1', 'h2', 1, $1, $2, $2)`, i+2, at)
		exec(`INSERT INTO intake.rejected_messages (integration, account, event_id, tenant, event_type, payload_sha256,
			stream_seq, subject, reason, rejected_at) VALUES ('demo', 'a', 'e', 't', 'x', 'h', $1, 's', 'malformed', $2)`, i+1, at)
	}
	replay := func(state string, at time.Time, items int) {
		var id string
		if err := st.Pool().QueryRow(ctx, `INSERT INTO intake.replays (id, requested_by, selector, mode, dry_run, rate, state, created_at)
			VALUES (gen_random_uuid(), 'ops', '{}', 'exact', false, 10, $1, $2) RETURNING id`, state, at).Scan(&id); err != nil {
			t.Fatal(err)
		}
		for i := range items {
			exec(`INSERT INTO intake.replay_items (replay_id, pos, integration, account, event_id, tenant, event_type, msg_id, outcome)
				VALUES ($1, $2, 'demo', 'a', 'e', 't', 'x', 'm' || $2::int, 'would_apply')`, id, i)
		}
	}
	replay("done", ago(400), 5)    // goes, with its items
	replay("running", ago(400), 2) // kept: a replay still running is not finished
	replay("done", ago(10), 3)     // kept

	dry, err := st.PurgeCount(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Purge(ctx, c, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"inbox": 5, "body_hashes": 2, "body_type_hashes": 3, "deliveries": 4, "executions": 2, "conflicts": 1,
		"rejected_messages": 1, "replay_items": 5, "replays": 1}
	sum := func(ps []store.Purged) map[string]int64 {
		m := map[string]int64{}
		for _, p := range ps {
			m[p.Table] += p.Rows
		}
		return m
	}
	if g := sum(got); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Errorf("purged %v, want %v", g, want)
	}
	if d := sum(dry); fmt.Sprint(d) != fmt.Sprint(want) {
		t.Errorf("dry run counted %v, want %v", d, want)
	}

	var left []string
	rows, err := st.Pool().Query(ctx, `SELECT integration || '/' || event_id FROM intake.inbox ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		left = append(left, k)
	}
	if fmt.Sprint(left) != "[demo/failed demo/quar demo/young long/kept]" {
		t.Errorf("inbox keeps %v", left)
	}
	count := func(table string) (n int) {
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM intake.`+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for table, n := range map[string]int{"body_hashes": 1, "body_type_hashes": 2, "deliveries": 3, "executions": 1, "conflicts": 1,
		"rejected_messages": 1, "replays": 2, "replay_items": 5} {
		if got := count(table); got != n {
			t.Errorf("%s keeps %d rows, want %d", table, got, n)
		}
	}

	// A second pass finds nothing, and the stats say nothing is overdue.
	if again, err := st.Purge(ctx, c, 2, nil); err != nil || len(again) != 0 {
		t.Errorf("second pass: %v, %v", again, err)
	}
	stats, err := st.RetentionStats(ctx, c, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if s.Overdue != 0 {
			t.Errorf("%s overdue by %s after a purge", s.Table, s.Overdue)
		}
		if s.Bytes <= 0 {
			t.Errorf("%s size %d", s.Table, s.Bytes)
		}
		if s.Table == "inbox" && (s.Oldest == nil || *s.Oldest != 300*day) {
			t.Errorf("inbox oldest = %v, want the quarantined row's 300 days", s.Oldest)
		}
	}
}

// TestPurgeLeaseIsExclusive: while one runner holds the purge lease
// another gets none; it gets it once the first lets go, or once the first's
// lease expired, and the first then finds it lost.
func TestPurgeLeaseIsExclusive(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := context.Background()
	a, err := st.LeasePurge(ctx, "a")
	if err != nil || a == nil {
		t.Fatalf("first lease: %v, %v", a, err)
	}
	if b, err := st.LeasePurge(ctx, "b"); err != nil || b != nil {
		t.Fatalf("second lease while the first is held: %v, %v", b, err)
	}
	a.Release()
	b, err := st.LeasePurge(ctx, "b")
	if err != nil || b == nil {
		t.Fatalf("lease after the release: %v, %v", b, err)
	}
	// b stalls past its expiry; a takes over and b finds out.
	if _, err := st.Pool().Exec(ctx, `UPDATE intake.purge_lease SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if a, err = st.LeasePurge(ctx, "a"); err != nil || a == nil {
		t.Fatalf("lease after the holder's expiry: %v, %v", a, err)
	}
	if err := b.Renew(ctx); !errors.Is(err, store.ErrPurgeLeaseLost) {
		t.Fatalf("the stalled holder's renewal: %v, want ErrPurgeLeaseLost", err)
	}
	if err := a.Renew(ctx); err != nil {
		t.Fatalf("the holder's renewal: %v", err)
	}
	// A pass whose lease is lost stops at its next batch.
	if _, err := st.Pool().Exec(ctx, `UPDATE intake.purge_lease SET holder = 'c'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Purge(ctx, store.Cutoffs{Inbox: time.Now(), History: time.Now(), Evidence: time.Now()}, 10, a); !errors.Is(err, store.ErrPurgeLeaseLost) {
		t.Fatalf("a pass with a lost lease: %v, want ErrPurgeLeaseLost", err)
	}
}
