package replayer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/faults"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

func sel(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func TestExactReplayOfProcessedEventAppliesNothing(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	r.publish("evt_1")
	r.settled()

	rep := r.replay(map[string]any{"selector": sel("keys", keysOf("evt_1")), "mode": "exact", "reason": "customer says it was lost"})
	if rep.Matched != 1 || rep.Published != 1 || rep.Outcomes[replayer.WouldDeduplicate] != 1 || rep.RequestedBy != "ops" {
		t.Fatalf("replay = %+v", rep)
	}
	r.settled()
	if n := r.count(`SELECT count(*) FROM effects`); n != 1 {
		t.Fatalf("%d business effects after an exact replay of a processed event, want 1", n)
	}
	var status inbox.Status
	var deliveries, seq int
	if err := r.db.QueryRow(context.Background(), `SELECT status, delivery_count, stream_seq FROM intake.inbox`).Scan(&status, &deliveries, &seq); err != nil {
		t.Fatal(err)
	}
	if status != inbox.StatusProcessed || deliveries != 1 || seq != 1 {
		t.Fatalf("inbox row changed by the replay: status %s, delivery_count %d, stream_seq %d", status, deliveries, seq)
	}
	copies := r.copies(envelope.StreamIn, envelope.HeaderReplayID, rep.ID)
	if want := "replay:" + rep.ID + ":demo/main/evt_1"; len(copies) != 1 || len(copies[want]) != 1 {
		t.Fatalf("INTAKE_IN copies of the replay = %v, want one with id %s", copies, want)
	}
	if n := len(r.copies(envelope.StreamOut, envelope.HeaderKey, "demo/main/evt_1")); n != 1 {
		t.Fatalf("INTAKE_OUT holds %d messages for the event, want 1", n)
	}
}

func TestFailedEventReplayedAfterFixIsProcessedOnce(t *testing.T) {
	t.Parallel()
	r := setup(t)
	bug := key("evt_bug").String()
	r.failing.Store(bug, true)
	r.start()
	r.publish("evt_ok", "evt_bug")
	r.settled()
	if n := r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'failed'`); n != 1 {
		t.Fatalf("%d failed rows, want 1", n)
	}

	r.failing.Delete(bug) // the fix is deployed
	var dry apiclient.Replay
	r.api(http.MethodPost, "/api/v1/replays", map[string]any{"selector": sel("status", "failed")}, http.StatusOK, &dry)
	if !dry.DryRun || dry.Matched != 1 || dry.Outcomes[replayer.WouldRetry] != 1 || len(dry.Sample) != 1 || dry.Sample[0] != bug {
		t.Fatalf("dry run = %+v", dry)
	}
	rep := r.replay(map[string]any{"selector": sel("status", "failed"), "reason": "fixed the bug"})
	if rep.Published != 1 {
		t.Fatalf("replay = %+v", rep)
	}
	r.settled()
	if n := r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'processed'`); n != 2 {
		t.Fatalf("%d processed rows after the replay, want 2", n)
	}
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, bug); n != 1 {
		t.Fatalf("%d effects for the fixed event, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.executions WHERE event_id = 'evt_bug' AND mode = 'retry' AND replay_id = $1`, rep.ID); n != 1 {
		t.Fatalf("%d retry executions linked to the replay, want 1", n)
	}

	// Replaying it again is harmless: now it is processed.
	again := r.replay(map[string]any{"selector": sel("keys", []string{bug})})
	if again.Outcomes[replayer.WouldDeduplicate] != 1 {
		t.Fatalf("second replay = %+v", again)
	}
	r.settled()
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, bug); n != 1 {
		t.Fatalf("%d effects for the fixed event after a second replay, want 1", n)
	}
}

func TestReexecuteRecordsALinkedExecution(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	r.publish("evt_re")
	r.settled()

	code, b := r.do(http.MethodPost, "/api/v1/replays", operatorToken,
		map[string]any{"selector": sel("keys", keysOf("evt_re")), "mode": "reexecute", "dry_run": false})
	if code != http.StatusBadRequest || !strings.Contains(string(b), "reason") {
		t.Fatalf("reexecute without a reason = %d %s, want 400 naming reason", code, b)
	}
	rep := r.replay(map[string]any{"selector": sel("keys", keysOf("evt_re")), "mode": "reexecute", "reason": "downstream lost the change"})
	if rep.Outcomes[replayer.WouldApply] != 1 || rep.Published != 1 {
		t.Fatalf("replay = %+v", rep)
	}
	r.settled()
	var modes []string
	rows, err := r.db.Query(context.Background(), `SELECT mode || ':' || replay_id FROM effects ORDER BY mode`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		modes = append(modes, s)
	}
	if rows.Err() != nil || len(modes) != 2 || modes[0] != "original:" || modes[1] != "reexecute:"+rep.ID {
		t.Fatalf("effects = %v, want the original and a re-execution linked to %s", modes, rep.ID)
	}

	var ev apiclient.EventDetail
	r.api(http.MethodGet, "/api/v1/events/demo/evt_re", nil, http.StatusOK, &ev)
	if len(ev.Executions) != 2 || ev.Executions[0].Mode != "original" || ev.Executions[1].Mode != "reexecute" ||
		ev.Executions[1].ReplayID == nil || *ev.Executions[1].ReplayID != rep.ID {
		t.Fatalf("executions = %+v", ev.Executions)
	}
	if len(ev.Replays) != 1 || ev.Replays[0].ID != rep.ID || ev.Replays[0].ItemState != store.ItemPublished || ev.Replays[0].Mode != "reexecute" {
		t.Fatalf("replays of the event = %+v", ev.Replays)
	}
	if ev.Status != inbox.StatusProcessed || ev.DeliveryCount != 1 {
		t.Fatalf("event = %+v", ev.Event)
	}
}

func TestRangeReplayOf1000EventsHasNoDuplicateEffects(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	const n = 1000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt_%04d", i)
	}
	seqs := r.publish(ids...)
	r.settled()

	rep := r.replay(map[string]any{
		"selector": sel("stream_seq", map[string]any{"from": seqs[0], "to": seqs[n-1]}),
		"reason":   "range replay", "rate": 10000,
	})
	if rep.Matched != n || rep.Published != n || rep.Duplicates != 0 || rep.Outcomes[replayer.WouldDeduplicate] != n || len(rep.Outcomes) != 1 {
		t.Fatalf("replay matched %d published %d duplicates %d outcomes %v; want %d each deduplicated", rep.Matched, rep.Published, rep.Duplicates, rep.Outcomes, n)
	}
	if len(rep.Counts) != 1 || rep.Counts[0] != (apiclient.OutcomeCount{Tenant: "acme", Integration: "demo", EventType: "invoice.paid", Outcome: replayer.WouldDeduplicate, Count: n}) {
		t.Fatalf("counts = %+v", rep.Counts)
	}
	r.settled()
	if got := r.count(`SELECT count(*) FROM effects`); got != n {
		t.Fatalf("%d business effects after replaying %d processed events, want %d", got, n, n)
	}
	if got := r.count(`SELECT count(DISTINCT key) FROM effects`); got != n {
		t.Fatalf("%d distinct effects, want %d", got, n)
	}
	if got := r.count(`SELECT count(*) FROM intake.inbox WHERE delivery_count <> 1 OR status <> 'processed'`); got != 0 {
		t.Fatalf("%d inbox rows changed by the replay", got)
	}
	copies := r.copies(envelope.StreamIn, envelope.HeaderReplayID, rep.ID)
	if len(copies) != n {
		t.Fatalf("%d distinct copies in INTAKE_IN, want %d", len(copies), n)
	}
	for id, s := range copies {
		if len(s) != 1 {
			t.Fatalf("copy %s published %d times", id, len(s))
		}
	}
}

func TestDryRunPredictsAndPublishesNothing(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.failing.Store(key("evt_fail").String(), true)
	r.start()
	seqs := r.publish("evt_done", "evt_fail", "evt_norow", "evt_gone")
	r.settled()
	// evt_norow: accepted, its inbox row lost; evt_gone: its message aged out of the stream.
	if _, err := r.db.Exec(context.Background(), `DELETE FROM intake.inbox WHERE event_id = 'evt_norow'`); err != nil {
		t.Fatal(err)
	}
	s, err := r.js.Stream(context.Background(), envelope.StreamIn)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(context.Background(), seqs[3]); err != nil {
		t.Fatal(err)
	}
	before := r.streamLastSeq(envelope.StreamIn)

	tests := []struct {
		name string
		req  map[string]any
		want map[string]int64
	}{
		{"keys exact", map[string]any{"selector": sel("keys", keysOf("evt_done", "evt_fail", "evt_gone", "evt_never"))},
			map[string]int64{replayer.WouldDeduplicate: 1, replayer.WouldRetry: 1, replayer.Missing: 2}},
		{"range exact", map[string]any{"selector": sel("stream_seq", map[string]any{"from": 1})},
			map[string]int64{replayer.WouldDeduplicate: 1, replayer.WouldRetry: 1, replayer.WouldApply: 1}},
		{"keys reexecute", map[string]any{"selector": sel("keys", keysOf("evt_done")), "mode": "reexecute", "reason": "r"},
			map[string]int64{replayer.WouldApply: 1}},
		{"status", map[string]any{"selector": sel("status", "failed"), "dry_run": true},
			map[string]int64{replayer.WouldRetry: 1}},
		{"time range", map[string]any{"selector": sel("since", time.Now().Add(-time.Hour).Format(time.RFC3339), "integration", "demo")},
			map[string]int64{replayer.WouldDeduplicate: 1, replayer.WouldRetry: 1, replayer.WouldApply: 1}},
	}
	for _, tt := range tests {
		var rep apiclient.Replay
		r.api(http.MethodPost, "/api/v1/replays", tt.req, http.StatusOK, &rep)
		if !rep.DryRun || rep.State != store.ReplayDone || rep.Published != 0 {
			t.Errorf("%s: %+v, want a finished dry run", tt.name, rep)
		}
		if fmt.Sprint(rep.Outcomes) != fmt.Sprint(tt.want) {
			t.Errorf("%s: outcomes %v, want %v", tt.name, rep.Outcomes, tt.want)
		}
	}
	if after := r.streamLastSeq(envelope.StreamIn); after != before {
		t.Fatalf("dry runs published: INTAKE_IN last sequence %d -> %d", before, after)
	}
	if n := r.count(`SELECT count(*) FROM intake.replays WHERE dry_run AND state = 'done'`); n != len(tests) {
		t.Fatalf("%d dry runs recorded, want %d", n, len(tests))
	}
	if n := r.count(`SELECT count(*) FROM intake.replay_items`); n != 0 {
		t.Fatalf("dry runs recorded %d items", n)
	}
}

func TestAPIAuth(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	body := map[string]any{"selector": sel("status", "failed")}
	tests := []struct {
		method, path, token string
		body                any
		want                int
	}{
		{"GET", "/api/v1/events", "", nil, 401},
		{"GET", "/api/v1/events", "not-a-token-0123456789", nil, 401},
		{"GET", "/api/v1/events", viewerToken, nil, 200},
		{"GET", "/api/v1/conflicts", viewerToken, nil, 200},
		{"GET", "/api/v1/replays", viewerToken, nil, 200},
		{"GET", "/api/v1/reconcile?from_seq=1", viewerToken, nil, 200},
		{"POST", "/api/v1/replays", "", body, 401},
		{"POST", "/api/v1/replays", "not-a-token-0123456789", body, 401},
		{"POST", "/api/v1/replays", viewerToken, body, 403},
		{"POST", "/api/v1/redeliveries", viewerToken, map[string]any{"selector": sel("stream_seq", map[string]any{"from": 1})}, 403},
		{"POST", "/api/v1/replays/00000000-0000-0000-0000-000000000000/cancel", viewerToken, nil, 403},
		{"POST", "/api/v1/replays", operatorToken, body, 200},
		{"POST", "/api/v1/replays/00000000-0000-0000-0000-000000000000/cancel", operatorToken, nil, 404},
		{"GET", "/api/v1/replays/nope", viewerToken, nil, 404},
	}
	for _, tt := range tests {
		if code, b := r.do(tt.method, tt.path, tt.token, tt.body); code != tt.want {
			t.Errorf("%s %s with %q = %d %s, want %d", tt.method, tt.path, tt.token, code, b, tt.want)
		}
	}
	// Refused requests are not replays: only the operator's dry run is recorded.
	if n := r.count(`SELECT count(*) FROM intake.replays`); n != 1 {
		t.Fatalf("%d replays recorded, want 1", n)
	}
}

func TestBadReplayRequests(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	tests := []struct {
		name string
		body any
		want string
	}{
		{"empty selector", map[string]any{"selector": map[string]any{}}, "selector"},
		{"unknown field", map[string]any{"selector": sel("status", "failed"), "dryrun": false}, "unknown field"},
		{"bad mode", map[string]any{"selector": sel("status", "failed"), "mode": "again"}, "mode"},
		{"bad status", map[string]any{"selector": sel("status", "lost")}, "selector.status"},
		{"bad key", map[string]any{"selector": sel("keys", []string{"nokey"})}, "selector.keys[0]"},
		{"bad range", map[string]any{"selector": sel("stream_seq", map[string]any{"from": 5, "to": 2})}, "stream_seq.to"},
		{"rate too high", map[string]any{"selector": sel("status", "failed"), "rate": 1_000_000}, "rate"},
	}
	for _, tt := range tests {
		code, b := r.do(http.MethodPost, "/api/v1/replays", operatorToken, tt.body)
		if code != http.StatusBadRequest || !strings.Contains(string(b), tt.want) {
			t.Errorf("%s: %d %s, want 400 mentioning %q", tt.name, code, b, tt.want)
		}
	}
	if n := r.count(`SELECT count(*) FROM intake.replays`); n != 0 {
		t.Fatalf("%d replays recorded from refused requests", n)
	}
}

func TestEveryReplayIsAudited(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	r.publish("evt_a")
	r.settled()
	var dry apiclient.Replay
	r.api(http.MethodPost, "/api/v1/replays", map[string]any{"selector": sel("keys", keysOf("evt_a")), "reason": "look first"}, http.StatusOK, &dry)
	real := r.replay(map[string]any{"selector": sel("keys", keysOf("evt_a")), "reason": "then do it"})
	var redeliv apiclient.Replay
	r.api(http.MethodPost, "/api/v1/redeliveries", map[string]any{"selector": sel("stream_seq", map[string]any{"from": 1}), "reason": "billing lost data"},
		http.StatusOK, &redeliv)

	var page apiclient.ReplayPage
	r.api(http.MethodGet, "/api/v1/replays?dry_runs=include&limit=2", nil, http.StatusOK, &page)
	if len(page.Replays) != 2 || page.NextCursor == "" {
		t.Fatalf("first page = %d replays, cursor %q", len(page.Replays), page.NextCursor)
	}
	var rest apiclient.ReplayPage
	r.api(http.MethodGet, "/api/v1/replays?dry_runs=include&limit=2&cursor="+page.NextCursor, nil, http.StatusOK, &rest)
	all := append(page.Replays, rest.Replays...)
	if len(all) != 3 || rest.NextCursor != "" {
		t.Fatalf("audit log has %d replays, want 3", len(all))
	}
	byID := map[string]apiclient.Replay{}
	for _, rp := range all {
		byID[rp.ID] = rp
		if rp.RequestedBy != "ops" || rp.CreatedAt.IsZero() || len(rp.Selector) == 0 {
			t.Errorf("replay %s not fully audited: %+v", rp.ID, rp)
		}
	}
	if d := byID[dry.ID]; !d.DryRun || d.Reason != "look first" || d.Mode != "exact" || d.Matched != 1 {
		t.Errorf("dry run audit = %+v", d)
	}
	if d := byID[real.ID]; d.DryRun || d.State != store.ReplayDone || d.Published != 1 || d.Reason != "then do it" || d.FinishedAt == nil {
		t.Errorf("replay audit = %+v", d)
	}
	var recorded struct {
		Source    string             `json:"source"`
		StreamSeq apiclient.SeqRange `json:"stream_seq"`
	}
	d := byID[redeliv.ID]
	if err := json.Unmarshal(d.Selector, &recorded); err != nil {
		t.Fatal(err)
	}
	if !d.DryRun || d.Mode != "redeliver" || recorded.Source != "stream" || recorded.StreamSeq.From != 1 {
		t.Errorf("redelivery audit = %+v (selector %s)", d, d.Selector)
	}
}

func TestReconcileFindsADeletedInboxRow(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	seqs := r.publish("evt_1", "evt_2", "evt_3", "evt_4", "evt_5")
	r.settled()
	if _, err := r.db.Exec(context.Background(), `DELETE FROM intake.inbox WHERE event_id = 'evt_3'`); err != nil {
		t.Fatal(err)
	}

	var res replayer.ReconcileResult
	r.api(http.MethodGet, fmt.Sprintf("/api/v1/reconcile?from_seq=%d&to_seq=%d", seqs[0], seqs[4]), nil, http.StatusOK, &res)
	if res.Checked != 5 || len(res.Missing) != 1 || res.Missing[0] != (apiclient.MissingEvent{Key: "demo/main/evt_3", StreamSeq: seqs[2]}) ||
		res.Pending != 0 || res.Fix == nil {
		t.Fatalf("reconcile = %+v", res)
	}
	// The time form finds the same.
	var byTime replayer.ReconcileResult
	r.api(http.MethodGet, "/api/v1/reconcile?since="+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), nil, http.StatusOK, &byTime)
	if len(byTime.Missing) != 1 || byTime.Missing[0].Key != "demo/main/evt_3" {
		t.Fatalf("reconcile by time = %+v", byTime)
	}

	// The suggested replay fixes it.
	fix := map[string]any{"selector": res.Fix.Selector, "mode": res.Fix.Mode, "reason": res.Fix.Reason}
	rep := r.replay(fix)
	if rep.Matched != 1 || rep.Outcomes[replayer.WouldApply] != 1 || rep.Published != 1 {
		t.Fatalf("fix replay = %+v", rep)
	}
	r.settled()
	var after replayer.ReconcileResult
	r.api(http.MethodGet, fmt.Sprintf("/api/v1/reconcile?from_seq=%d&to_seq=%d", seqs[0], seqs[4]), nil, http.StatusOK, &after)
	if len(after.Missing) != 0 || after.Fix != nil {
		t.Fatalf("after the fix, reconcile = %+v", after)
	}
	if n := r.count(`SELECT count(*) FROM intake.inbox WHERE event_id = 'evt_3' AND status = 'processed'`); n != 1 {
		t.Fatal("the fix did not bring the inbox row back")
	}
}

func TestCancelStopsAReplay(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt_%d", i)
	}
	r.publish(ids...)
	r.settled()
	// 1,000 events at 10/s take 100s: the cancel lands long before the end.
	var rep apiclient.Replay
	r.api(http.MethodPost, "/api/v1/replays", map[string]any{"selector": sel("stream_seq", map[string]any{"from": 1}),
		"rate": 10, "dry_run": false}, http.StatusAccepted, &rep)
	testenv.Eventually(t, 30*time.Second, func() bool {
		r.api(http.MethodGet, "/api/v1/replays/"+rep.ID, nil, http.StatusOK, &rep)
		return rep.Published > 0
	}, "replay never published")
	var cancelled apiclient.Replay
	r.api(http.MethodPost, "/api/v1/replays/"+rep.ID+"/cancel", nil, http.StatusOK, &cancelled)
	if cancelled.State != store.ReplayCancelled || cancelled.CancelledBy == nil || *cancelled.CancelledBy != "ops" {
		t.Fatalf("cancel = %+v", cancelled)
	}
	r.api(http.MethodPost, "/api/v1/replays/"+rep.ID+"/cancel", nil, http.StatusConflict, nil)
	// Once no replayer holds the replay, what it recorded is what the stream holds.
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND ((classid::bigint << 32) | objid::bigint) = hashtextextended('intake.replay:' || $1, 0)`, rep.ID) == 0
	}, "the replayer never let go of the cancelled replay")
	final := r.waitReplay(rep.ID, store.ReplayCancelled)
	copies := r.copies(envelope.StreamIn, envelope.HeaderReplayID, rep.ID)
	if int64(len(copies)) != final.Published || final.Published >= final.Matched {
		t.Fatalf("cancelled replay recorded %d published of %d, stream holds %d copies", final.Published, final.Matched, len(copies))
	}
	if n := r.count(`SELECT count(*) FROM intake.replay_items WHERE replay_id = $1 AND state = 'published'`, rep.ID); int64(n) != final.Published {
		t.Fatalf("%d items published, replay says %d", n, final.Published)
	}
}

// TestKilledReplayerResumesWithoutDoublePublishing kills a replayer between
// the PubAcks of a batch and their record (the worst moment), then starts
// another: it finds the unrecorded copies in the stream and publishes only
// the rest — without relying on the duplicate window.
func TestKilledReplayerResumesWithoutDoublePublishing(t *testing.T) {
	t.Parallel()
	r := setup(t)
	const n = 300
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt_%d", i)
	}
	r.publish(ids...) // no processor: the replay's copies just pile up in INTAKE_IN

	killed := make(chan struct{})
	var killA func()
	batches := 0
	a, _ := r.newReplayer(replayer.Options{})
	ctxA, cancelA := context.WithCancel(faults.With(context.Background(), faults.Hooks{AfterPublish: func(string, int) error {
		batches++
		if batches < 2 {
			return nil
		}
		killA()
		close(killed)
		return fmt.Errorf("killed after %d batches", batches)
	}}))
	killA = cancelA
	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		_ = a.Run(ctxA)
	}()
	no := false
	rep, err := a.Replay(context.Background(), "ops", apiclient.ReplayRequest{
		Selector: apiclient.Selector{StreamSeq: &apiclient.SeqRange{From: 1, To: n}}, DryRun: &no, Rate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	<-killed
	<-doneA
	mid, err := r.store.GetReplay(context.Background(), rep.ID)
	if err != nil {
		t.Fatal(err)
	}
	inStream := len(r.copies(envelope.StreamIn, envelope.HeaderReplayID, rep.ID))
	if mid.State != store.ReplayRunning || int(mid.Published) >= inStream {
		t.Fatalf("after the kill: state %s, %d recorded, %d in the stream; want running with unrecorded copies", mid.State, mid.Published, inStream)
	}

	b, _ := r.newReplayer(replayer.Options{ResumeInterval: 100 * time.Millisecond})
	r.runReplayer(b)
	var final store.Replay
	testenv.Eventually(t, 60*time.Second, func() bool {
		final, err = r.store.GetReplay(context.Background(), rep.ID)
		return err == nil && final.State != store.ReplayRunning
	}, "the second replayer never finished the replay")
	if final.State != store.ReplayDone || final.Published != n || final.Duplicates != 0 {
		t.Fatalf("resumed replay: state %s, published %d, duplicates %d; want done, %d, 0", final.State, final.Published, final.Duplicates, n)
	}
	copies := r.copies(envelope.StreamIn, envelope.HeaderReplayID, rep.ID)
	if len(copies) != n {
		t.Fatalf("%d distinct copies in INTAKE_IN, want %d", len(copies), n)
	}
	for id, seqs := range copies {
		if len(seqs) != 1 {
			t.Fatalf("%s published %d times", id, len(seqs))
		}
	}
}

// TestReplayerLosingNATSMidReplayResumes closes a replayer's NATS
// connection mid-replay (the process's view of a crash) and lets another
// replayer finish.
func TestReplayerLosingNATSMidReplayResumes(t *testing.T) {
	t.Parallel()
	r := setup(t)
	const n = 300
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt_%d", i)
	}
	r.publish(ids...)

	a, ncA := r.newReplayer(replayer.Options{})
	stopA := r.runReplayer(a)
	no := false
	rep, err := a.Replay(context.Background(), "ops", apiclient.ReplayRequest{
		Selector: apiclient.Selector{StreamSeq: &apiclient.SeqRange{From: 1}}, DryRun: &no, Rate: 100})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		got, err := r.store.GetReplay(context.Background(), rep.ID)
		return err == nil && got.Published >= 40
	}, "replay never got going")
	ncA.Close()
	stopA()

	b, _ := r.newReplayer(replayer.Options{ResumeInterval: 100 * time.Millisecond})
	r.runReplayer(b)
	var final store.Replay
	testenv.Eventually(t, 60*time.Second, func() bool {
		final, err = r.store.GetReplay(context.Background(), rep.ID)
		return err == nil && final.State != store.ReplayRunning
	}, "the second replayer never finished the replay")
	if final.State != store.ReplayDone || final.Published != n {
		t.Fatalf("resumed replay: state %s, published %d; want done, %d", final.State, final.Published, n)
	}
	copies := r.copies(envelope.StreamIn, envelope.HeaderReplayID, rep.ID)
	if len(copies) != n {
		t.Fatalf("%d distinct copies in INTAKE_IN, want %d", len(copies), n)
	}
	for id, seqs := range copies {
		if len(seqs) != 1 {
			t.Fatalf("%s published %d times", id, len(seqs))
		}
	}
}
