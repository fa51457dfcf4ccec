package replayer_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/testenv"
	"github.com/intakehq/intake/internal/testenv/testrig"
	"github.com/intakehq/intake/pkg/app"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/replayer"
)

// TestRedriveReplaysLostCommits is issue 15's acceptance: events the
// processor acknowledged whose commit is gone (as a failover with
// asynchronous replication leaves them: no inbox row, no business row) are
// processed again by a re-drive pass, audited and counted; a second pass
// re-drives nothing, and a message the processor has not acknowledged is
// never re-driven.
func TestRedriveReplaysLostCommits(t *testing.T) {
	t.Parallel()
	r := setup(t) // the app's own replayer does not re-drive: this test drives the passes
	r.start()
	ctx := context.Background()
	r.publish("evt_1", "evt_2", "evt_3", "evt_4", "evt_5")
	r.settled()

	// The commits of evt_2 and evt_4 are lost behind Intake's back.
	lost := keysOf("evt_2", "evt_4")
	for _, q := range []string{`DELETE FROM intake.inbox WHERE integration || '/' || account || '/' || event_id = ANY($1)`,
		`DELETE FROM effects WHERE key = ANY($1)`} {
		if _, err := r.db.Exec(ctx, q, lost); err != nil {
			t.Fatal(err)
		}
	}

	reg := prometheus.NewRegistry()
	logs := &testenv.Buffer{}
	rp, _ := r.newReplayer(replayer.Options{RedriveInterval: -1, Registry: reg, Log: slog.New(slog.NewTextHandler(logs, nil))})
	r.runReplayer(rp) // publishes the replays the passes start

	pass, err := rp.RedrivePass(ctx, replayer.RedriveFailover)
	if err != nil {
		t.Fatal(err)
	}
	if pass.Missing != 2 || pass.Redriven != 2 || len(pass.ReplayIDs) != 1 || pass.FromSeq != 1 || pass.ToSeq != 5 {
		t.Fatalf("first pass: %+v, want 2 of 1..5 re-driven by one replay", pass)
	}
	rep := r.waitReplay(pass.ReplayIDs[0], "done")
	if rep.RequestedBy != replayer.RedriveRequester || rep.DryRun || rep.Mode != "exact" || rep.Published != 2 ||
		!strings.Contains(rep.Reason, "redrive (failover pass)") {
		t.Fatalf("re-drive replay: %+v", rep)
	}
	r.settled()
	for _, k := range lost {
		if n := r.count(`SELECT count(*) FROM intake.inbox WHERE integration || '/' || account || '/' || event_id = $1
			AND status = 'processed'`, k); n != 1 {
			t.Errorf("%s: %d processed inbox rows after the re-drive, want 1", k, n)
		}
		if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, k); n != 1 {
			t.Errorf("%s: %d business rows after the re-drive, want 1", k, n)
		}
	}
	if n := r.count(`SELECT count(*) FROM effects`); n != 5 {
		t.Fatalf("%d business rows, want 5: the others ran again", n)
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"re-drove events") || !strings.Contains(logs.String(), pass.ReplayIDs[0]) {
		t.Fatalf("no warning naming the replay: %s", logs)
	}

	// A message the processor has not acknowledged (its consumer paused)
	// is pending, never re-driven; nor is anything the first pass fixed.
	if _, err := r.js.PauseConsumer(ctx, envelope.StreamIn, envelope.ConsumerName, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	pendingSeq := r.publish("evt_6")[0]
	pass, err = rp.RedrivePass(ctx, replayer.RedriveScheduled)
	if err != nil {
		t.Fatal(err)
	}
	if pass.Missing != 0 || pass.Redriven != 0 || len(pass.ReplayIDs) != 0 || pass.ToSeq >= pendingSeq {
		t.Fatalf("second pass: %+v, want nothing re-driven and the pending message (seq %d) unchecked", pass, pendingSeq)
	}
	var page replayer.ReplayPage
	r.api(http.MethodGet, "/api/v1/replays?limit=100", nil, http.StatusOK, &page)
	redrives := 0
	for _, rep := range page.Replays {
		if rep.RequestedBy == replayer.RedriveRequester {
			redrives++
		}
		if slices.Contains(rep.Sample, key("evt_6").String()) {
			t.Fatalf("the pending message was replayed: %+v", rep)
		}
	}
	if redrives != 1 {
		t.Fatalf("%d re-drive replays, want 1", redrives)
	}

	want := `
# HELP intake_redriven_events_total Events acknowledged by the processor without an inbox row that a re-drive pass replayed.
# TYPE intake_redriven_events_total counter
intake_redriven_events_total 2
# HELP intake_redrive_passes_total Re-drive passes run (see RedrivePass), by trigger (start, scheduled, failover).
# TYPE intake_redrive_passes_total counter
intake_redrive_passes_total{trigger="failover"} 1
intake_redrive_passes_total{trigger="scheduled"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "intake_redriven_events_total", "intake_redrive_passes_total"); err != nil {
		t.Fatal(err)
	}

	// GET /api/v1/redrive (viewer) shows the passes, newest first.
	router := chi.NewRouter()
	rp.Mount(router)
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)
	var st replayer.RedriveStatus
	if _, err := testrig.NewClient(srv.URL, viewerToken).Do(ctx, http.MethodGet, "/api/v1/redrive", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.Enabled || len(st.Passes) != 2 || st.Passes[0].Trigger != replayer.RedriveScheduled ||
		st.Passes[1].Trigger != replayer.RedriveFailover || st.Passes[1].Redriven != 2 || st.Cursor < 5 || st.Cursor >= pendingSeq {
		t.Fatalf("GET /api/v1/redrive: %+v", st)
	}
}

// TestRedriveStartPass: Run with default options starts a pass by itself
// that re-drives a lost commit without anyone asking.
func TestRedriveStartPass(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	ctx := context.Background()
	r.publish("evt_1", "evt_2")
	r.settled()
	if _, err := r.db.Exec(ctx, `DELETE FROM intake.inbox WHERE event_id = 'evt_1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := r.db.Exec(ctx, `DELETE FROM effects WHERE key = $1`, key("evt_1").String()); err != nil {
		t.Fatal(err)
	}
	rp, _ := r.newReplayer(replayer.Options{})
	r.runReplayer(rp)
	testenv.Eventually(t, 60*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE event_id = 'evt_1' AND status = 'processed'`) == 1
	}, "the start pass did not re-drive evt_1")
	st := rp.RedriveStatus()
	if !st.Enabled || len(st.Passes) == 0 || st.Passes[len(st.Passes)-1].Trigger != replayer.RedriveStart {
		t.Fatalf("status: %+v", st)
	}
}

// TestRedriveSkipsQueuedKeys: a pass does not replay again what a running
// replay has yet to publish (an overlapping or lookback pass while the
// first re-drive is still on its way).
func TestRedriveSkipsQueuedKeys(t *testing.T) {
	t.Parallel()
	r := setup(t)
	// The processor only: no replayer publishes until this test runs one.
	testrig.StartApp(t, r.cfg, app.Options{Roles: app.Roles{Processor: true}, Handler: r.handler()})
	ctx := context.Background()
	r.publish("evt_1", "evt_2", "evt_3")
	r.settled()
	if _, err := r.db.Exec(ctx, `DELETE FROM intake.inbox WHERE event_id IN ('evt_1', 'evt_3')`); err != nil {
		t.Fatal(err)
	}

	rp, _ := r.newReplayer(replayer.Options{RedriveInterval: -1})
	first, err := rp.RedrivePass(ctx, replayer.RedriveStart)
	if err != nil || first.Redriven != 2 {
		t.Fatalf("first pass: %+v, %v", first, err)
	}
	again, err := rp.RedrivePass(ctx, replayer.RedriveFailover)
	if err != nil || again.Missing != 2 || again.Redriven != 0 || len(again.ReplayIDs) != 0 {
		t.Fatalf("a pass while the first re-drive is queued: %+v, %v; want 2 missing, none re-driven", again, err)
	}

	r.runReplayer(rp)
	testenv.Eventually(t, 60*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'processed'`) == 3
	}, "the queued re-drive was not processed")
	if n := r.count(`SELECT count(*) FROM effects`); n != 5 {
		t.Fatalf("%d business rows, want 5 (3 first runs, 2 re-driven)", n)
	}
}

// TestRedriveAfterServerChange: when another Postgres server answers (here
// the same one restarted, as the watcher sees a promoted standby), Run
// counts it and looks back at once, re-driving a commit lost just before.
func TestRedriveAfterServerChange(t *testing.T) {
	t.Parallel()
	pg := testenv.PrivatePostgres(t)
	r := setupWith(t, testrig.Options{Config: testConfig, DatabaseURL: pg.URL()})
	r.start()
	ctx := context.Background()
	r.publish("evt_1", "evt_2", "evt_3")
	r.settled()

	reg := prometheus.NewRegistry()
	rp, _ := r.newReplayer(replayer.Options{RedriveInterval: time.Hour, ServerWatchInterval: 50 * time.Millisecond, Registry: reg})
	r.runReplayer(rp)
	testenv.Eventually(t, 30*time.Second, func() bool { return len(rp.RedriveStatus().Passes) == 1 }, "no start pass")

	// The commit of evt_2 is lost with the old primary.
	if _, err := r.db.Exec(ctx, `DELETE FROM intake.inbox WHERE event_id = 'evt_2'`); err != nil {
		t.Fatal(err)
	}
	if _, err := r.db.Exec(ctx, `DELETE FROM effects WHERE key = $1`, key("evt_2").String()); err != nil {
		t.Fatal(err)
	}
	pg.Restart(t)

	testenv.Eventually(t, 60*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE event_id = 'evt_2' AND status = 'processed'`) == 1
	}, "the failover pass did not re-drive evt_2")
	if n := r.count(`SELECT count(*) FROM effects`); n != 3 {
		t.Fatalf("%d business rows, want 3", n)
	}
	var failover *replayer.Redrive
	for _, p := range rp.RedriveStatus().Passes {
		if p.Trigger == replayer.RedriveFailover && p.Redriven == 1 {
			failover = &p
		}
	}
	if failover == nil {
		t.Fatalf("no failover pass re-drove evt_2: %+v", rp.RedriveStatus())
	}
	want := `
# HELP intake_postgres_server_changes_total Changes of the Postgres server behind the pool (failover, restart, promotion) seen by the server watcher.
# TYPE intake_postgres_server_changes_total counter
intake_postgres_server_changes_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "intake_postgres_server_changes_total"); err != nil {
		t.Fatal(err)
	}
}

// TestRedriveRecordsLostConflicts: a conflicting delivery the processor
// acknowledged whose conflict record is gone (lost with a failed-over
// primary) is recorded again by a re-drive pass, once; a forged copy under
// another tenant, whose rejection is gone, is not taken for a conflict.
func TestRedriveRecordsLostConflicts(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	ctx := context.Background()
	r.publish("evt_1")
	other := envelope.NewDelivery(key("evt_1"), "acme", "invoice.paid", []byte(`{"id":"evt_1","other":true}`), time.Now()).Msg()
	forged := envelope.NewDelivery(key("evt_1"), "mallory", "invoice.paid", []byte(`{"id":"evt_1","forged":true}`), time.Now()).Msg()
	var seqs []uint64
	for _, m := range []*nats.Msg{other, forged} {
		ack, err := r.js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	r.settled()
	if n := r.count(`SELECT count(*) FROM intake.conflicts WHERE conflicting_stream_seq = $1`, int64(seqs[0])); n != 1 {
		t.Fatalf("%d conflict records for the other payload, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.rejected_messages WHERE stream_seq = $1`, int64(seqs[1])); n != 1 {
		t.Fatalf("%d rejections of the forged copy, want 1", n)
	}
	// Both records are lost behind Intake's back.
	if _, err := r.db.Exec(ctx, `DELETE FROM intake.conflicts`); err != nil {
		t.Fatal(err)
	}
	if _, err := r.db.Exec(ctx, `DELETE FROM intake.rejected_messages`); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	rp, _ := r.newReplayer(replayer.Options{RedriveInterval: -1, Registry: reg})
	res, err := rp.Reconcile(ctx, replayer.ReconcileRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Missing) != 0 || len(res.LostConflicts) != 1 || res.LostConflicts[0].StreamSeq != seqs[0] {
		t.Fatalf("reconcile: missing %v, lost conflicts %v; want only the other payload (seq %d)", res.Missing, res.LostConflicts, seqs[0])
	}
	pass, err := rp.RedrivePass(ctx, replayer.RedriveFailover)
	if err != nil {
		t.Fatal(err)
	}
	if pass.ConflictsRecorded != 1 || pass.Redriven != 0 {
		t.Fatalf("pass: %+v, want one conflict recorded and nothing replayed", pass)
	}
	if n := r.count(`SELECT count(*) FROM intake.conflicts WHERE conflicting_stream_seq = $1 AND tenant = 'acme'
		AND original_stream_seq = 1`, int64(seqs[0])); n != 1 {
		t.Fatalf("%d conflict records for the other payload after the pass, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.conflicts`); n != 1 {
		t.Fatalf("%d conflict records, want 1: the forged copy is no conflict", n)
	}
	if pass, err = rp.RedrivePass(ctx, replayer.RedriveFailover); err != nil || pass.ConflictsRecorded != 0 {
		t.Fatalf("second pass: %+v, %v; want nothing recorded", pass, err)
	}
	want := `
# HELP intake_redrive_conflicts_recorded_total Conflict records a re-drive pass wrote again: conflicting deliveries acknowledged by the processor whose record was lost.
# TYPE intake_redrive_conflicts_recorded_total counter
intake_redrive_conflicts_recorded_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "intake_redrive_conflicts_recorded_total"); err != nil {
		t.Fatal(err)
	}
}
