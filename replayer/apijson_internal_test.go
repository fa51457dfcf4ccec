package replayer

import (
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// updateAPIJSON rewrites testdata/api/*.json from the current code: run it
// only to record a deliberate change of the API (docs/contract.md).
var updateAPIJSON = flag.Bool("update-api-json", false, "rewrite testdata/api/*.json")

// Fixture values: every field set, a time with nanoseconds in a zone that
// is not UTC (Postgres answers in the session's zone).
var (
	pinAt       = time.Date(2026, 5, 1, 12, 30, 45, 123456789, time.FixedZone("", 2*3600))
	pinLater    = pinAt.Add(90 * time.Second)
	pinErr      = "handler: bug"
	pinBy       = "ops"
	pinReplayID = "7b0c7a53-6c0e-4b7a-9a51-2f7a3c1d9e10"
	pinMode     = "reexecute"
	pinSeq      = int64(42)
)

func fullDispatchAttempt() store.DispatchAttempt {
	return store.DispatchAttempt{ID: 5, Destination: "billing", MsgID: "0b3c6a1e-6d0f-5b8a-9f1e-2c7a3d1e9f10", Key: "demo/main/evt_1",
		Integration: "demo", Tenant: "acme", EventType: "invoice.paid", StreamSeq: 12, Attempt: 2, Outcome: store.DispatchRetry,
		StatusCode: 503, ErrorClass: "server_error", Latency: 120 * time.Millisecond, Response: "busy", AttemptedAt: pinAt, NextAttemptAt: &pinLater}
}

func fullEvent() store.EventRecord {
	return store.EventRecord{Key: "demo/main/evt_1", Integration: "demo", Account: "main", EventID: "evt_1", Tenant: "acme",
		EventType: "invoice.paid", Status: inbox.StatusFailed, PayloadSHA256: "ab12", DeliveryCount: 2, Attempts: 3,
		StreamSeq: 7, FirstReceivedAt: pinAt, LastReceivedAt: pinLater, ProcessedAt: &pinLater, Error: &pinErr, Conflicts: 1}
}

func fullConflict() store.Conflict {
	return store.Conflict{ID: 9, Key: "demo/main/evt_1", Integration: "demo", Account: "main", EventID: "evt_1", Tenant: "acme",
		OriginalSHA256: "ab12", ConflictingSHA256: "cd34", OriginalStreamSeq: 7, ConflictingStreamSeq: 8, ReceivedAt: pinAt, DetectedAt: pinLater}
}

func fullRejection() store.Rejection {
	orig := envelope.Key{Integration: "demo", Account: "main", EventID: "evt_0"}
	return store.Rejection{ID: 3, Key: "demo/main/evt_1", Integration: "demo", Account: "main", EventID: "evt_1", Tenant: "acme",
		EventType: "invoice.paid", PayloadSHA256: "ab12", StreamSeq: 11, Subject: "intake.in.demo.invoice.paid",
		MsgID: "replay:x:demo/main/evt_1", ReplayID: &pinReplayID, ReplayMode: &pinMode, Reason: store.RejectReplayedBody,
		Detail: "body of demo/main/evt_0", ReceivedAt: &pinAt, RejectedAt: pinLater, Original: &orig, OriginalKey: orig.String()}
}

func fullReplay() store.Replay {
	return store.Replay{ID: pinReplayID, RequestedBy: pinBy, CreatedAt: pinAt, Selector: json.RawMessage(`{"keys": ["demo/main/evt_1"]}`),
		Mode: "exact", Reason: "lost", DryRun: false, Rate: 100, AdmitReplayedBodies: true, State: store.ReplayCancelled, Matched: 3, Published: 2,
		Duplicates: 1, Outcomes: map[string]int64{WouldRetry: 2, Missing: 1},
		Counts: []store.OutcomeCount{{Tenant: "acme", Integration: "demo", EventType: "invoice.paid", Outcome: WouldRetry, Count: 2}},
		Sample: []string{"demo/main/evt_1"}, CancelledBy: &pinBy, Error: &pinErr, FinishedAt: &pinLater, ResumeFromSeq: 5}
}

// apiJSON are the answers of /api/v1 the operator CLI and its users read,
// each encoded as the server encodes it.
func apiJSON() map[string]func(w http.ResponseWriter) {
	return map[string]func(w http.ResponseWriter){
		"event_page": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, eventPage([]store.EventRecord{fullEvent(), {}}, "next"))
		},
		"event_page_empty": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, eventPage([]store.EventRecord{}, ""))
		},
		"event_detail": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, eventHistory{EventRecord: fullEvent(),
				ConflictRecords: []store.Conflict{fullConflict()},
				Deliveries: []store.DeliveryRecord{
					{Key: envelope.Key{Integration: "demo"}, ReceiptID: "r1", ReceivedAt: pinAt, Instance: "ingress-0", StatusCode: 200,
						Answer: "accepted", RetryHints: map[string]string{"Stripe-Retry": "2"}},
					{ReceiptID: "r2", ReceivedAt: pinLater, Instance: "ingress-1", StatusCode: 200, Answer: "duplicate"},
				},
				Executions: []store.ExecutionRecord{{ID: "x1", Mode: "original", StreamSeq: 7, ExecutedAt: pinAt},
					{ID: "x2", Mode: pinMode, ReplayID: &pinReplayID, StreamSeq: 12, ExecutedAt: pinLater}},
				Replays: []store.ReplayRef{{ID: pinReplayID, Mode: pinMode, State: store.ReplayDone, RequestedBy: pinBy, Reason: "lost",
					CreatedAt: pinAt, ItemState: store.ItemPublished, PublishedSeq: &pinSeq}, {}},
				Rejections:     []store.Rejection{fullRejection()},
				ReplayedBodies: []store.Rejection{{}},
				Attempts: []store.Attempt{{StreamSeq: 7, Delivery: 1, MaxDeliver: 5, Handler: "invoices", ErrorClass: "sql 23505",
					Error: "duplicate key", FailedAt: pinAt, NextAttemptAt: &pinLater}, {}},
				DispatchAttempts: []store.DispatchAttempt{fullDispatchAttempt(), {}},
			}.wire())
		},
		"find": func(w http.ResponseWriter) {
			e := wireEvent(fullEvent())
			writeJSON(w, http.StatusOK, apiclient.FindResult{Query: "7", Searched: []string{"INTAKE_IN sequence 7"},
				Matches: []apiclient.FindMatch{{How: "stream_seq", Key: e.Key, Event: &e}, {How: "stream_seq", Key: "demo/main/evt_2", Note: "no inbox row"}}})
		},
		"conflict_diff": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, apiclient.ConflictDiff{Conflict: wireConflict(fullConflict()),
				Original:    apiclient.ConflictPayload{StreamSeq: 7, SHA256: "ab12", Body: `{"a":1}`, JSON: true},
				Conflicting: apiclient.ConflictPayload{StreamSeq: 12, SHA256: "cd34", Missing: "message 12 is no longer in INTAKE_IN"},
				Structural:  true, Fields: []apiclient.FieldChange{{Path: "$.a", Op: "change", Left: "1", Right: "2"}, {Path: "$.b", Op: "add", Right: `"x"`}}})
		},
		"find_none": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, apiclient.FindResult{Query: "x", Matches: []apiclient.FindMatch{}, Searched: []string{}})
		},
		"event_retrying": func(w http.ResponseWriter) {
			ev := fullEvent()
			ev.Status, ev.ProcessedAt, ev.NextAttemptAt, ev.MaxDeliver = store.StatusRetrying, nil, &pinLater, 5
			writeJSON(w, http.StatusOK, eventPage([]store.EventRecord{ev}, ""))
		},
		"event_detail_empty": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, eventHistory{EventRecord: store.EventRecord{}, ConflictRecords: []store.Conflict{},
				Deliveries: []store.DeliveryRecord{}, Executions: []store.ExecutionRecord{}, Replays: []store.ReplayRef{},
				Rejections: []store.Rejection{}, ReplayedBodies: []store.Rejection{}, Attempts: []store.Attempt{},
				DispatchAttempts: []store.DispatchAttempt{}}.wire())
		},
		"destination_attempts": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, apiclient.DispatchAttemptPage{
				Attempts: wireAll([]store.DispatchAttempt{fullDispatchAttempt(), {}}, wireDispatchAttempt), NextCursor: "c1"})
		},
		"destinations": func(w http.ResponseWriter) {
			full := wireDestination(config.Destination{Name: "billing", URL: "https://u:p@billing.internal/in?token=x",
				Match: config.DestinationMatch{Integrations: []string{"demo"}}},
				store.DestinationState{Paused: true, PausedBy: "ops", PausedReason: "migrating", PausedAt: &pinAt, CircuitOpen: true, CircuitChanged: &pinLater},
				store.DestinationStats{Attempts: 4, Delivered: 1, Retried: 2, Failed: 1, LastAt: &pinLater, LastOutcome: "failed", LastStatus: 422, LastClass: "client_error"},
				15*time.Minute)
			backlog, age := uint64(3), 42.5
			full.Backlog, full.OldestUndeliveredAgeSeconds = &backlog, &age
			writeJSON(w, http.StatusOK, apiclient.DestinationDetail{Destination: full, RecentAttempts: wireAll([]store.DispatchAttempt{fullDispatchAttempt()}, wireDispatchAttempt),
				Actions: []apiclient.DestinationAction{{Action: "pause", RequestedBy: "ops", Reason: "migrating", At: pinAt}}})
		},
		"destination_list_empty": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, apiclient.DestinationList{Destinations: []apiclient.Destination{
				wireDestination(config.Destination{Name: "crm", URL: "http://127.0.0.1:9/hook"},
					store.DestinationState{}, store.DestinationStats{}, time.Hour)}})
		},
		"event_detail_nil": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, eventHistory{EventRecord: fullEvent()}.wire())
		},
		"conflict_page": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, conflictPage([]store.Conflict{fullConflict(), {}}, "next"))
		},
		"conflict_page_empty": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, conflictPage([]store.Conflict{}, ""))
		},
		"rejection_page": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, rejectionPage([]store.Rejection{fullRejection(), {}}, "next"))
		},
		"rejection_page_empty": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, rejectionPage([]store.Rejection{}, ""))
		},
		"replay_page": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, replayPage([]store.Replay{fullReplay(), {}}, "next"))
		},
		"replay_page_empty": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, replayPage([]store.Replay{}, ""))
		},
		"replay": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusAccepted, wireReplay(fullReplay()))
		},
		"replay_results": func(w http.ResponseWriter) {
			rep := wireReplay(fullReplay())
			rep.Results = &apiclient.ReplayResults{Counts: map[string]int64{store.ResultProcessed: 1, store.ResultFailedAgain: 2},
				ByPrediction: []apiclient.ResultCount{{Predicted: WouldRetry, Result: store.ResultFailedAgain, Count: 2},
					{Predicted: WouldRetry, Result: store.ResultProcessed, Count: 1}}, Settled: 42}
			writeJSON(w, http.StatusOK, rep)
		},
		"replay_zero": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, wireReplay(store.Replay{}))
		},
		"replay_empty_lists": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, wireReplay(store.Replay{Outcomes: map[string]int64{}, Counts: []store.OutcomeCount{}, Sample: []string{}}))
		},
		"cancel_conflict": func(w http.ResponseWriter) {
			rep := fullReplay()
			writeJSON(w, http.StatusConflict, map[string]any{"error": "replay is " + rep.State + ", not running", "replay": wireReplay(rep)})
		},
		"reconcile": func(w http.ResponseWriter) {
			missing := []apiclient.MissingEvent{{Key: "demo/main/evt_2", StreamSeq: 2}}
			no := false
			writeJSON(w, http.StatusOK, ReconcileResult{ReconcileResult: apiclient.ReconcileResult{Shard: "eu", Checked: 5,
				Missing: missing, Truncated: true, Pending: 1, Rejected: 2, AckFloor: 4, LastSeq: 5, LostConflicts: missing,
				Fix: &apiclient.ReplayRequest{Selector: apiclient.Selector{Keys: []string{"demo/main/evt_2"}, Integration: "demo", Tenant: "acme",
					EventType: "invoice.paid", StreamSeq: &apiclient.SeqRange{From: 2, To: 2}, Since: &pinAt, Until: &pinLater, Status: "failed"},
					Mode: inbox.ReplayExact, DryRun: &no, Reason: "reconcile", Rate: 10}},
				missingSeq: map[envelope.Key]uint64{{Integration: "demo"}: 2}})
		},
		"reconcile_clean": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, ReconcileResult{ReconcileResult: apiclient.ReconcileResult{Checked: 5, Missing: []apiclient.MissingEvent{}, AckFloor: 5, LastSeq: 5}})
		},
		"gaps": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, apiclient.Gaps{CheckedAt: pinAt, Stream: envelope.StreamIn, FirstSeq: 1, LastSeq: 9, Deleted: 2,
				DeletedSample: []uint64{3, 4}, InboxMaxSeq: 11, RolledBack: 2, ReceiptsWithoutEvent: 1, ReceiptsSample: []string{"demo/main/evt_9"}})
		},
		"gaps_none": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, apiclient.Gaps{CheckedAt: pinAt, Stream: envelope.StreamIn, FirstSeq: 1, LastSeq: 9})
		},
		"redrive": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, apiclient.RedriveStatus{Enabled: true, Interval: "1m0s", Lookback: "10m0s", Cursor: 9, Passes: []apiclient.Redrive{
				{Trigger: apiclient.RedriveFailover, At: pinAt, FromSeq: 1, ToSeq: 9, Checked: 9, Missing: 2, Redriven: 1, Truncated: true,
					ConflictsRecorded: 1, Unfixable: 1, ReplayIDs: []string{pinReplayID}, Error: "timeout"},
				{Trigger: apiclient.RedriveStart, At: pinLater, ReplayIDs: []string{}},
			}})
		},
		"redrive_none": func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, apiclient.RedriveStatus{Interval: "-1s", Lookback: "10m0s", Passes: []apiclient.Redrive{}})
		},
	}
}

// TestAPIJSONIsPinned: the answers' JSON — field names and order, omitempty,
// null against [], time format — is the contract scripts and the CLI read;
// it is compared byte for byte with what it was.
func TestAPIJSONIsPinned(t *testing.T) {
	for name, write := range apiJSON() {
		rec := httptest.NewRecorder()
		write(rec)
		golden := filepath.Join("testdata", "api", name+".json")
		if *updateAPIJSON {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, rec.Body.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (record with -update-api-json)", err)
		}
		if got := rec.Body.String(); got != string(want) {
			t.Errorf("%s: the API's JSON changed\ngot:\n%s\nwant (%s):\n%s", name, got, golden, want)
		}
	}
}

// TestWireVocabularyIsTheStores: the replayer passes the values of
// intake.replays through as they are; apiclient's names for them must be
// the same values.
func TestWireVocabularyIsTheStores(t *testing.T) {
	for _, c := range [][2]string{
		{apiclient.ReplayRunning, store.ReplayRunning}, {apiclient.ReplayDone, store.ReplayDone},
		{apiclient.ReplayFailed, store.ReplayFailed}, {apiclient.ReplayCancelled, store.ReplayCancelled},
		{apiclient.ReplayRedeliver, store.ReplayRedeliver}, {apiclient.OutcomeMissing, Missing},
		{apiclient.ResultProcessed, store.ResultProcessed}, {apiclient.ResultFailedAgain, store.ResultFailedAgain},
		{apiclient.ResultDeduplicated, store.ResultDeduplicated}, {apiclient.ResultRejected, store.ResultRejected},
		{apiclient.ResultInFlight, store.ResultInFlight}, {apiclient.DryRunsExclude, store.DryRunsExclude},
		{apiclient.DryRunsInclude, store.DryRunsInclude}, {apiclient.DryRunsOnly, store.DryRunsOnly},
	} {
		if c[0] != c[1] {
			t.Errorf("apiclient says %q where intake.replays holds %q", c[0], c[1])
		}
	}
}
