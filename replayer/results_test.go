package replayer_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

// guardedConfig is testConfig with the replay guard on, so that a body
// sent again under another id is refused (a rejection a replay can meet).
var guardedConfig = strings.Replace(testConfig, "    account: main\n", "    account: main\n    replay_guard: true\n", 1)

// resultsRig has, settled: evt_ok processed, evt_bug failed (its handler
// fails for good), evt_orig processed and evt_copy — evt_orig's body under
// another id — refused by the replay guard. It returns evt_copy's sequence.
func resultsRig(t *testing.T) (*rig, uint64) {
	t.Helper()
	r := setupWith(t, testrig.Options{Config: guardedConfig})
	r.failing.Store(key("evt_bug").String(), true)
	r.start()
	r.publish("evt_ok", "evt_bug", "evt_orig")
	msg := envelope.NewDelivery(key("evt_copy"), "acme", "invoice.paid", body("evt_orig"), time.Now()).Msg()
	ack, err := r.js.PublishMsg(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	r.settled()
	if n := r.count(`SELECT count(*) FROM intake.rejected_messages WHERE event_id = 'evt_copy' AND reason = 'replayed_body'`); n != 1 {
		t.Fatalf("%d replayed_body rejections of evt_copy, want 1", n)
	}
	return r, ack.Sequence
}

// TestReplayResultsBesideThePrediction: a finished replay's GET says what
// became of each copy — processed, failed again, deduplicated, rejected —
// by the outcome the plan predicted; a dry run and a redelivery have no
// results.
func TestReplayResultsBesideThePrediction(t *testing.T) {
	t.Parallel()
	r, _ := resultsRig(t)

	rep := r.replay(map[string]any{"selector": sel("stream_seq", map[string]any{"from": 1}), "reason": "see what happens"})
	r.settled()
	var after apiclient.Replay // fresh: decoding into rep would merge its results' map
	r.api(http.MethodGet, "/api/v1/replays/"+rep.ID, nil, http.StatusOK, &after)
	res := after.Results
	if res == nil {
		t.Fatalf("finished replay without results: %+v", after)
	}
	want := map[string]int64{store.ResultDeduplicated: 2, store.ResultFailedAgain: 1, store.ResultRejected: 1}
	if len(res.Counts) != len(want) {
		t.Errorf("results = %v, want %v", res.Counts, want)
	}
	for k, n := range want {
		if res.Counts[k] != n {
			t.Errorf("results[%s] = %d, want %d (all: %v)", k, res.Counts[k], n, res.Counts)
		}
	}
	by := map[string]int64{}
	for _, c := range res.ByPrediction {
		by[c.Predicted+" → "+c.Result] = c.Count
	}
	for k, n := range map[string]int64{replayer.WouldRetry + " → failed_again": 1, replayer.WouldDeduplicate + " → deduplicated": 2,
		replayer.WouldRefuseReplayedBody + " → rejected": 1} {
		if by[k] != n {
			t.Errorf("by prediction %s = %d, want %d (all: %v)", k, by[k], n, by)
		}
	}
	if res.Settled == 0 {
		t.Errorf("results settled at 0")
	}

	// The bug is fixed: a replay of the failed event processes it.
	r.failing.Delete(key("evt_bug").String())
	fixed := r.replay(map[string]any{"selector": sel("keys", keysOf("evt_bug")), "reason": "fixed"})
	r.settled()
	var fixedAfter apiclient.Replay
	r.api(http.MethodGet, "/api/v1/replays/"+fixed.ID, nil, http.StatusOK, &fixedAfter)
	if res := fixedAfter.Results; res == nil || res.Counts[store.ResultProcessed] != 1 || len(res.Counts) != 1 {
		t.Fatalf("results of the fixed replay = %+v", res)
	}

	// A dry run predicts only; a redelivery's copies bypass the inbox.
	var dry apiclient.Replay
	r.api(http.MethodPost, "/api/v1/replays", map[string]any{"selector": sel("keys", keysOf("evt_ok"))}, http.StatusOK, &dry)
	dryID := dry.ID
	dry = apiclient.Replay{}
	r.api(http.MethodGet, "/api/v1/replays/"+dryID, nil, http.StatusOK, &dry)
	var redeliv apiclient.Replay
	r.api(http.MethodPost, "/api/v1/redeliveries", map[string]any{"selector": sel("stream_seq", map[string]any{"from": 1}),
		"dry_run": false, "reason": "subscriber lost them"}, http.StatusAccepted, &redeliv)
	redelivID := r.waitReplay(redeliv.ID, store.ReplayDone).ID
	redeliv = apiclient.Replay{}
	r.api(http.MethodGet, "/api/v1/redeliveries/"+redelivID, nil, http.StatusOK, &redeliv)
	if dry.Results != nil || redeliv.Results != nil {
		t.Errorf("results of a dry run %+v, of a redelivery %+v: want none", dry.Results, redeliv.Results)
	}
}

// TestAuditLogFilters: GET /api/v1/replays leaves dry runs out unless
// dry_runs says otherwise, filters by mode, state, requested_by and
// created time, and refuses a value that cannot match.
func TestAuditLogFilters(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	r.publish("evt_a")
	r.settled()
	var dry apiclient.Replay
	r.api(http.MethodPost, "/api/v1/replays", map[string]any{"selector": sel("keys", keysOf("evt_a"))}, http.StatusOK, &dry)
	real := r.replay(map[string]any{"selector": sel("keys", keysOf("evt_a")), "reason": "then do it"})
	var redeliv apiclient.Replay
	r.api(http.MethodPost, "/api/v1/redeliveries", map[string]any{"selector": sel("stream_seq", map[string]any{"from": 1}),
		"dry_run": false, "reason": "billing lost data"}, http.StatusAccepted, &redeliv)
	redeliv = r.waitReplay(redeliv.ID, store.ReplayDone)

	ids := func(q string) []string {
		t.Helper()
		var page apiclient.ReplayPage
		r.api(http.MethodGet, "/api/v1/replays?"+q, nil, http.StatusOK, &page)
		var out []string
		for _, rp := range page.Replays {
			out = append(out, rp.ID)
		}
		return out
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", []string{redeliv.ID, real.ID}},
		{"dry_runs=exclude", []string{redeliv.ID, real.ID}},
		{"dry_runs=include", []string{redeliv.ID, real.ID, dry.ID}},
		{"dry_runs=only", []string{dry.ID}},
		{"mode=redeliver", []string{redeliv.ID}},
		{"mode=exact&dry_runs=include", []string{real.ID, dry.ID}},
		{"state=done&requested_by=ops", []string{redeliv.ID, real.ID}},
		{"requested_by=" + replayer.RedriveRequester, nil},
		{"since=" + future, nil},
		{"until=" + future + "&limit=1", []string{redeliv.ID}},
	} {
		if got := ids(c.query); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("?%s = %v, want %v", c.query, got, c.want)
		}
	}
	// The cursor pages within the filter.
	var page apiclient.ReplayPage
	r.api(http.MethodGet, "/api/v1/replays?dry_runs=include&limit=2", nil, http.StatusOK, &page)
	if rest := ids("dry_runs=include&limit=2&cursor=" + page.NextCursor); len(page.Replays) != 2 || strings.Join(rest, ",") != dry.ID {
		t.Errorf("second page = %v, want the dry run", rest)
	}
	for _, c := range []struct{ query, want string }{
		{"mode=replay", `mode: unknown \"replay\"; one of: exact, reexecute, redeliver`},
		{"state=finished", `state: unknown \"finished\"; one of: awaiting_approval, running, done, failed, cancelled`},
		{"dry_runs=yes", `dry_runs: unknown \"yes\"; one of: exclude, include, only`},
	} {
		if code, b := r.do(http.MethodGet, "/api/v1/replays?"+c.query, viewerToken, nil); code != http.StatusBadRequest || !strings.Contains(string(b), c.want) {
			t.Errorf("?%s = %d %s, want 400 saying %s", c.query, code, b, c.want)
		}
	}
}

// TestRejectionsBySequence: from_seq and to_seq bound the rejected
// message's INTAKE_IN sequence, as a reconcile's range does.
func TestRejectionsBySequence(t *testing.T) {
	t.Parallel()
	r, seq := resultsRig(t)
	s := strconv.FormatUint(seq, 10)
	for _, c := range []struct {
		query string
		want  int
	}{
		{"from_seq=" + s + "&to_seq=" + s, 1},
		{"from_seq=" + s, 1},
		{"to_seq=" + strconv.FormatUint(seq-1, 10), 0},
		{"from_seq=" + strconv.FormatUint(seq+1, 10), 0},
	} {
		var page apiclient.RejectionPage
		r.api(http.MethodGet, "/api/v1/rejections?"+c.query, nil, http.StatusOK, &page)
		if len(page.Rejections) != c.want {
			t.Errorf("?%s: %d rejections, want %d", c.query, len(page.Rejections), c.want)
		}
	}
	if code, b := r.do(http.MethodGet, "/api/v1/rejections?from_seq=x", viewerToken, nil); code != http.StatusBadRequest {
		t.Errorf("from_seq=x = %d %s, want 400", code, b)
	}
}

// TestReplayResultsConflict: a range replay of a conflicting delivery's
// message (another payload than the inbox row's) is predicted to conflict,
// and its result is the conflict record at the copy's sequence.
func TestReplayResultsConflict(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	r.publish("evt_c")
	r.settled()
	ack, err := r.js.PublishMsg(context.Background(),
		envelope.NewDelivery(key("evt_c"), "acme", "invoice.paid", []byte(`{"id":"evt_c","tampered":true}`), time.Now()).Msg())
	if err != nil {
		t.Fatal(err)
	}
	r.settled()
	rep := r.replay(map[string]any{"selector": sel("stream_seq", map[string]any{"from": ack.Sequence, "to": ack.Sequence}), "reason": "again"})
	if rep.Outcomes[replayer.WouldConflict] != 1 {
		t.Fatalf("predicted %v, want %s", rep.Outcomes, replayer.WouldConflict)
	}
	r.settled()
	var after apiclient.Replay
	r.api(http.MethodGet, "/api/v1/replays/"+rep.ID, nil, http.StatusOK, &after)
	if res := after.Results; res == nil || res.Counts[store.ResultConflict] != 1 || len(res.Counts) != 1 {
		t.Fatalf("results = %+v, want one conflict", res)
	}
}
