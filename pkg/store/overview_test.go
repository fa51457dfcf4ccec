package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/store"
)

// The overview's aggregates count by integration within their window: the
// events first received with their extra deliveries and lag, the failed
// and quarantined by last delivery, the conflicts by detection, and the
// hourly bars.
func TestOverviewAggregates(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Hour).Add(30 * time.Minute)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := st.Pool().Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	seq := 0
	inbox := func(integration, status string, first, last time.Time, deliveries int, lag time.Duration) {
		seq++
		var processed any
		if lag > 0 {
			processed = first.Add(lag)
		}
		exec(`INSERT INTO intake.inbox (integration, account, event_id, tenant, event_type, payload_sha256, status,
			first_received_at, last_received_at, stream_seq, delivery_count, processed_at)
			VALUES ($1, 'a', $2, 't', 'x', 'h', $3, $4, $5, $6, $7, $8)`,
			integration, fmt.Sprint("e", seq), status, first, last, seq, deliveries, processed)
	}
	hourAgo := now.Add(-time.Hour)
	inbox("demo", "processed", now.Add(-10*time.Minute), now.Add(-10*time.Minute), 1, 100*time.Millisecond)
	inbox("demo", "processed", now.Add(-20*time.Minute), now.Add(-5*time.Minute), 3, 300*time.Millisecond)
	inbox("demo", "failed", now.Add(-2*time.Hour), now.Add(-time.Minute), 1, 0)                  // received before the window, failed in it
	inbox("demo", "quarantined", now.Add(-3*time.Hour), now.Add(-2*time.Hour), 1, 0)             // both before the window
	inbox("gh", "processed", now.Add(-90*time.Minute), now.Add(-90*time.Minute), 2, time.Second) // before the window
	// Failed, then processed by a re-execution 35 minutes later: an
	// operator's replay, not processing lag (issue 34 item 3).
	inbox("demo", "processed", now.Add(-40*time.Minute), now.Add(-40*time.Minute), 1, 35*time.Minute)
	exec(`INSERT INTO intake.executions (integration, account, event_id, mode, replay_id, stream_seq)
		VALUES ('demo', 'a', $1, 'reexecute', 'r-1', $2)`, fmt.Sprint("e", seq), seq)
	for i, at := range []time.Time{now.Add(-time.Minute), now.Add(-2 * time.Hour)} {
		exec(`INSERT INTO intake.conflicts (integration, account, event_id, tenant, original_sha256, conflicting_sha256,
			original_stream_seq, conflicting_stream_seq, received_at, detected_at) VALUES ('gh', 'a', 'e', 't', 'h1', 'h2', 1, $1, $2, $2)`, i+2, at)
	}

	received, err := st.ReceivedSince(ctx, hourAgo)
	if err != nil {
		t.Fatal(err)
	}
	if len(received) != 1 || received[0].Integration != "demo" || received[0].Events != 3 || received[0].Duplicates != 2 ||
		received[0].LagP50 != 200*time.Millisecond || received[0].LagP95 != 290*time.Millisecond {
		t.Errorf("ReceivedSince = %+v; want demo: 3 events, 2 duplicates, lag p50 200ms p95 290ms (the replayed one left out)", received)
	}
	unresolved, err := st.UnresolvedSince(ctx, hourAgo)
	if err != nil {
		t.Fatal(err)
	}
	if len(unresolved) != 1 || unresolved[0] != (store.StatusCount{Integration: "demo", Status: "failed", Count: 1}) {
		t.Errorf("UnresolvedSince = %+v; want demo failed 1", unresolved)
	}
	conflicts, err := st.ConflictsSince(ctx, hourAgo)
	if err != nil {
		t.Fatal(err)
	}
	if len(conflicts) != 1 || conflicts[0] != (store.IntegrationCount{Integration: "gh", Count: 1}) {
		t.Errorf("ConflictsSince = %+v; want gh 1", conflicts)
	}
	pending, err := st.OutboxPendingByIntegration(ctx)
	if err != nil || len(pending) != 0 {
		t.Errorf("OutboxPendingByIntegration = %+v, %v; want none", pending, err)
	}
	hours, err := st.HourlySince(ctx, now.Add(-4*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	byHour := map[string]store.HourCount{}
	for _, h := range hours {
		byHour[fmt.Sprint(h.Integration, " ", now.Sub(h.Hour).Round(time.Minute))] = h
	}
	for k, want := range map[string][2]int64{"demo 30m0s": {2, 0}, "demo 1h30m0s": {1, 0}, "demo 2h30m0s": {1, 1}, "demo 3h30m0s": {1, 1}, "gh 1h30m0s": {1, 0}} {
		if h := byHour[k]; h.Events != want[0] || h.Unresolved != want[1] {
			t.Errorf("HourlySince %s = %+v; want %d events, %d unresolved", k, h, want[0], want[1])
		}
	}
	if len(hours) != 5 {
		t.Errorf("HourlySince: %d buckets, want 5: %+v", len(hours), hours)
	}
}
