package replayer_test

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
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

	pass, err := rp.RedrivePass(ctx, apiclient.RedriveFailover)
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
	pass, err = rp.RedrivePass(ctx, apiclient.RedriveScheduled)
	if err != nil {
		t.Fatal(err)
	}
	if pass.Missing != 0 || pass.Redriven != 0 || len(pass.ReplayIDs) != 0 || pass.ToSeq >= pendingSeq {
		t.Fatalf("second pass: %+v, want nothing re-driven and the pending message (seq %d) unchecked", pass, pendingSeq)
	}
	var page apiclient.ReplayPage
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
	st, err := apiclient.New(srv.URL, viewerToken, nil).Redrive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Enabled || len(st.Passes) != 2 || st.Passes[0].Trigger != apiclient.RedriveScheduled ||
		st.Passes[1].Trigger != apiclient.RedriveFailover || st.Passes[1].Redriven != 2 || st.Cursor < 5 || st.Cursor >= pendingSeq {
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
	if !st.Enabled || len(st.Passes) == 0 || st.Passes[len(st.Passes)-1].Trigger != apiclient.RedriveStart {
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
	testrig.StartApp(t, r.cfg, intake.Options{Roles: intake.Roles{Processor: true}, Handler: r.handler()})
	ctx := context.Background()
	r.publish("evt_1", "evt_2", "evt_3")
	r.settled()
	if _, err := r.db.Exec(ctx, `DELETE FROM intake.inbox WHERE event_id IN ('evt_1', 'evt_3')`); err != nil {
		t.Fatal(err)
	}

	rp, _ := r.newReplayer(replayer.Options{RedriveInterval: -1})
	first, err := rp.RedrivePass(ctx, apiclient.RedriveStart)
	if err != nil || first.Redriven != 2 {
		t.Fatalf("first pass: %+v, %v", first, err)
	}
	again, err := rp.RedrivePass(ctx, apiclient.RedriveFailover)
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
	var failover *apiclient.Redrive
	for _, p := range rp.RedriveStatus().Passes {
		if p.Trigger == apiclient.RedriveFailover && p.Redriven == 1 {
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
	pass, err := rp.RedrivePass(ctx, apiclient.RedriveFailover)
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
	if pass, err = rp.RedrivePass(ctx, apiclient.RedriveFailover); err != nil || pass.ConflictsRecorded != 0 {
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

// fillers publishes n deliveries named prefix_0.. and returns their
// sequences.
func (r *rig) fillers(prefix string, n int) []uint64 {
	r.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s_%d", prefix, i)
	}
	return r.publish(ids...)
}

// loseCommits removes the inbox rows and business rows of ids, as a
// failover with asynchronous replication loses their commits.
func (r *rig) loseCommits(ids ...string) {
	r.t.Helper()
	for _, q := range []string{`DELETE FROM intake.inbox WHERE integration || '/' || account || '/' || event_id = ANY($1)`,
		`DELETE FROM effects WHERE key = ANY($1)`} {
		if _, err := r.db.Exec(context.Background(), q, keysOf(ids...)); err != nil {
			r.t.Fatal(err)
		}
	}
}

// processedOnce fails unless each of ids has one processed inbox row and
// one business row.
func (r *rig) processedOnce(ids ...string) {
	r.t.Helper()
	for _, k := range keysOf(ids...) {
		if n := r.count(`SELECT count(*) FROM intake.inbox WHERE integration || '/' || account || '/' || event_id = $1
			AND status = 'processed'`, k); n != 1 {
			r.t.Errorf("%s: %d processed inbox rows, want 1", k, n)
		}
		if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, k); n != 1 {
			r.t.Errorf("%s: %d business rows, want 1", k, n)
		}
	}
}

// TestRedriveFailoverPassBelowCursor is the reviewer's scenario: the cursor
// at a low sequence, a lost commit just above it, many newer messages, a
// failover pass with a lookback that covers none of them. The pass starts
// below the cursor (not at the lookback), and when its range is more than
// one pass checks it leaves the cursor where it stopped, so the scheduled
// passes go on from there instead of past what nobody checked.
func TestRedriveFailoverPassBelowCursor(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	ctx := context.Background()
	const lookback = 2 * time.Second
	// 100 × 10 chunks: a pass checks 1,000 sequences, re-checking 500.
	rp, _ := r.newReplayer(replayer.Options{RedriveInterval: -1, RedriveLookback: lookback, ReconcileMaxSpan: 100})
	r.runReplayer(rp)

	r.publish("evt_0")
	r.settled()
	if pass, err := rp.RedrivePass(ctx, apiclient.RedriveScheduled); err != nil || rp.RedriveStatus().Cursor != 1 {
		t.Fatalf("first pass: %+v, %v; want the cursor at 1", pass, err)
	}
	lost := r.publish("evt_lost")[0]
	r.fillers("early", 1000)
	lost2 := r.publish("evt_lost2")[0]
	r.fillers("late", 199)
	published := time.Now()
	r.settled()
	r.loseCommits("evt_lost", "evt_lost2")
	if lost != 2 || lost2 != 1003 {
		t.Fatalf("lost commits at %d and %d, want 2 and 1003", lost, lost2)
	}
	// The lookback covers only the two newest messages.
	testenv.Eventually(t, 10*time.Second, func() bool { return time.Since(published) > lookback }, "clock")
	last := r.publish("evt_new_1", "evt_new_2")[1]
	r.settled()

	failover, err := rp.RedrivePass(ctx, apiclient.RedriveFailover)
	if err != nil {
		t.Fatal(err)
	}
	if failover.FromSeq != 1 || failover.ToSeq != 1000 || failover.Redriven != 1 || rp.RedriveStatus().Cursor != 1000 {
		t.Fatalf("failover pass: %+v, cursor %d; want 1..1000 checked, evt_lost re-driven, the cursor at 1000",
			failover, rp.RedriveStatus().Cursor)
	}
	scheduled, err := rp.RedrivePass(ctx, apiclient.RedriveScheduled)
	if err != nil {
		t.Fatal(err)
	}
	// Up to the ack floor: past last once the first re-drive's copy is acked.
	if scheduled.FromSeq != 501 || scheduled.ToSeq < last || scheduled.Redriven != 1 || rp.RedriveStatus().Cursor != scheduled.ToSeq {
		t.Fatalf("scheduled pass: %+v; want 501..%d (at least) checked and evt_lost2 re-driven", scheduled, last)
	}
	for _, id := range append(failover.ReplayIDs, scheduled.ReplayIDs...) {
		r.waitReplay(id, "done")
	}
	r.settled()
	r.processedOnce("evt_lost", "evt_lost2")
	if n := r.count(`SELECT count(*) FROM effects`); n != int(last) {
		t.Fatalf("%d business rows, want %d: the others ran again", n, last)
	}
}

// TestRedriveLookbackCoversLateAcks: a lookback pass also checks what the
// processor acked within the lookback although it was published long before
// (handler retries, a backlog): from the ack floor of a lookback ago, below
// both the lookback's first message and the cursor's overlap.
func TestRedriveLookbackCoversLateAcks(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	ctx := context.Background()
	const lookback = 5 * time.Second
	rp, _ := r.newReplayer(replayer.Options{RedriveInterval: -1, RedriveLookback: lookback})
	r.runReplayer(rp)

	// evt_slow waits in the stream (the processor paused) longer than the
	// lookback; a pass samples the ack floor meanwhile. The processor
	// creates its consumer as it starts: wait for it before pausing it.
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, err := r.js.Consumer(ctx, envelope.StreamIn, envelope.ConsumerName)
		return err == nil
	}, "the processor never created its consumer")
	if _, err := r.js.PauseConsumer(ctx, envelope.StreamIn, envelope.ConsumerName, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	slow := r.publish("evt_slow")[0]
	if _, err := rp.RedrivePass(ctx, apiclient.RedriveStart); err != nil {
		t.Fatal(err)
	}
	sampled := time.Now()
	testenv.Eventually(t, 20*time.Second, func() bool { return time.Since(sampled) > lookback }, "clock")
	if _, err := r.js.ResumeConsumer(ctx, envelope.StreamIn, envelope.ConsumerName); err != nil {
		t.Fatal(err)
	}
	r.fillers("filler", 1200)
	r.settled()

	// A pass checks it all (its commit is there) and moves the cursor far
	// above; then the commit is lost.
	checkedAt := time.Now()
	pass, err := rp.RedrivePass(ctx, apiclient.RedriveScheduled)
	if err != nil || pass.FromSeq != slow || pass.Redriven != 0 || rp.RedriveStatus().Cursor != slow+1200 {
		t.Fatalf("pass: %+v, %v; want %d..%d checked, nothing re-driven", pass, err, slow, slow+1200)
	}
	r.loseCommits("evt_slow")
	failover, err := rp.RedrivePass(ctx, apiclient.RedriveFailover)
	if err != nil {
		t.Fatal(err)
	}
	if failover.Redriven != 1 && time.Since(checkedAt) >= lookback {
		t.Skipf("the failover pass ran %s after the ack floor passed evt_slow, more than the lookback (%s): too slow a machine",
			time.Since(checkedAt), lookback)
	}
	if failover.FromSeq != slow || failover.Redriven != 1 || len(failover.ReplayIDs) != 1 {
		t.Fatalf("failover pass: %+v; want evt_slow (seq %d) re-driven", failover, slow)
	}
	r.waitReplay(failover.ReplayIDs[0], "done")
	r.settled()
	r.processedOnce("evt_slow")
}

// TestRedriveUnfixable: a rejection whose record was lost (another tenant's
// message, its rejected_messages row gone) looks missing to every pass. The
// first replays it once (the copy is rejected again under its own
// sequence); the later ones count it unfixable, log it once (its stream
// sequence, what to do) and start no replay.
func TestRedriveUnfixable(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	ctx := context.Background()
	r.publish("evt_1")
	bad := envelope.NewDelivery(key("evt_bad"), "other", "invoice.paid", body("evt_bad"), time.Now()).Msg()
	ack, err := r.js.PublishMsg(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	r.settled()
	if n := r.count(`SELECT count(*) FROM intake.rejected_messages WHERE reason = 'tenant_mismatch'`); n != 1 {
		t.Fatalf("%d rejections of the other tenant's message, want 1", n)
	}
	if _, err := r.db.Exec(ctx, `DELETE FROM intake.rejected_messages`); err != nil { // the record lost
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	logs := &testenv.Buffer{}
	rp, _ := r.newReplayer(replayer.Options{RedriveInterval: -1, Registry: reg, Log: slog.New(slog.NewTextHandler(logs, nil))})
	r.runReplayer(rp)
	first, err := rp.RedrivePass(ctx, apiclient.RedriveStart)
	if err != nil || first.Missing != 1 || first.Redriven != 1 || first.Unfixable != 0 || len(first.ReplayIDs) != 1 {
		t.Fatalf("first pass: %+v, %v; want evt_bad re-driven once", first, err)
	}
	r.waitReplay(first.ReplayIDs[0], "done")
	r.settled()
	for i := range 2 {
		pass, err := rp.RedrivePass(ctx, apiclient.RedriveScheduled)
		if err != nil || pass.Missing != 1 || pass.Unfixable != 1 || pass.Redriven != 0 || len(pass.ReplayIDs) != 0 {
			t.Fatalf("pass %d after the replay: %+v, %v; want evt_bad unfixable, no replay", i+2, pass, err)
		}
	}
	pass, err := rp.RedrivePass(ctx, apiclient.RedriveFailover)
	if err != nil || pass.Unfixable != 1 || len(pass.ReplayIDs) != 0 {
		t.Fatalf("failover pass: %+v, %v; want evt_bad unfixable, no replay", pass, err)
	}

	var page apiclient.ReplayPage
	r.api(http.MethodGet, "/api/v1/replays?limit=100", nil, http.StatusOK, &page)
	if len(page.Replays) != 1 {
		t.Fatalf("%d replays, want the first pass's only", len(page.Replays))
	}
	if n := strings.Count(logs.String(), "level=ERROR msg=\"re-drive cannot fix"); n != 1 {
		t.Fatalf("%d unfixable error logs, want 1: %s", n, logs)
	}
	line := logs.String()[strings.Index(logs.String(), "level=ERROR"):]
	if !strings.Contains(line, fmt.Sprintf("stream_seqs=[%d]", ack.Sequence)) || !strings.Contains(line, "GET /api/v1/rejections") ||
		!strings.Contains(line, "intake replay") || strings.Contains(line, "evt_bad\\\"") {
		t.Fatalf("unfixable log: %s", line)
	}
	want := `
# HELP intake_redrive_unfixable_total Messages acknowledged by the processor without an inbox row that are still missing after a re-drive replay ran for them (counted once each): not replayed again, see the error log.
# TYPE intake_redrive_unfixable_total counter
intake_redrive_unfixable_total 1
# HELP intake_redriven_events_total Events acknowledged by the processor without an inbox row that a re-drive pass replayed.
# TYPE intake_redriven_events_total counter
intake_redriven_events_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "intake_redrive_unfixable_total", "intake_redriven_events_total"); err != nil {
		t.Fatal(err)
	}
}

// TestRedriveRecordsConflictsOfALostKey: a failover took both the event's
// row and the conflict record of its second payload. The pass re-drives
// the event (its first payload), and once that has its row again a later
// pass records the second payload's conflict — though the range was
// checked before the row was back.
func TestRedriveRecordsConflictsOfALostKey(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	ctx := context.Background()
	r.publish("evt_1")
	other := envelope.NewDelivery(key("evt_1"), "acme", "invoice.paid", []byte(`{"id":"evt_1","other":true}`), time.Now()).Msg()
	ack, err := r.js.PublishMsg(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	r.settled()
	for _, q := range []string{`DELETE FROM intake.conflicts`, `DELETE FROM intake.inbox`, `DELETE FROM effects`} {
		if _, err := r.db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rp, _ := r.newReplayer(replayer.Options{RedriveInterval: -1})
	r.runReplayer(rp)
	pass, err := rp.RedrivePass(ctx, apiclient.RedriveFailover)
	if err != nil || pass.Redriven != 1 || pass.ConflictsRecorded != 0 {
		t.Fatalf("first pass: %+v, %v; want the event re-driven", pass, err)
	}
	r.waitReplay(pass.ReplayIDs[0], "done")
	r.settled()
	pass, err = rp.RedrivePass(ctx, apiclient.RedriveScheduled)
	if err != nil || pass.ConflictsRecorded != 1 || pass.Redriven != 0 {
		t.Fatalf("second pass: %+v, %v; want the second payload's conflict recorded", pass, err)
	}
	// The original is the row the re-drive wrote: its first payload, from
	// the replay copy.
	if n := r.count(`SELECT count(*) FROM intake.conflicts c JOIN intake.inbox i USING (integration, account, event_id)
		WHERE c.conflicting_stream_seq = $1 AND c.original_sha256 = i.payload_sha256 AND c.original_stream_seq = i.stream_seq`,
		int64(ack.Sequence)); n != 1 {
		t.Fatalf("%d conflict records of the second payload against the re-driven row, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM effects`); n != 1 {
		t.Fatalf("%d business rows, want 1", n)
	}
}

// TestRedriveLeavesMalformedMessagesAlone reproduces issue 30's item 7: a
// message the processor's parse refuses (Intake-Replay-Mode without an id,
// a non-integer Intake-Object-Version) is terminated, and the re-drive must
// not republish it — its copy would carry the replay headers that make it
// parse, and the event would run. The processor records it as rejected
// (reason malformed); reconcile counts it rejected, not missing.
func TestRedriveLeavesMalformedMessagesAlone(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	ctx := context.Background()
	malformed := map[string]func(nats.Header){
		"evt_mode_only": func(h nats.Header) { h.Set(envelope.HeaderReplayMode, "exact") },
		"evt_bad_version": func(h nats.Header) {
			h.Set(envelope.HeaderObjectID, "in_1")
			h.Set(envelope.HeaderObjectVersion, "not-a-number")
		},
	}
	var seqs []int64
	for id, spoil := range malformed {
		msg := envelope.NewDelivery(key(id), "acme", "invoice.paid", body(id), time.Now()).Msg()
		spoil(msg.Header)
		ack, err := r.js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, int64(ack.Sequence))
	}
	r.publish("evt_ok")
	r.settled()
	if n := r.count(`SELECT count(*) FROM intake.rejected_messages WHERE reason = 'malformed' AND stream_seq = ANY($1)
		AND subject LIKE 'intake.in.demo.%' AND tenant = 'acme' AND integration = 'demo'`, seqs); n != 2 {
		t.Errorf("%d malformed messages recorded as rejected, want 2", n)
	}

	rp, _ := r.newReplayer(replayer.Options{RedriveInterval: -1})
	r.runReplayer(rp)
	pass, err := rp.RedrivePass(ctx, apiclient.RedriveFailover)
	if err != nil {
		t.Fatal(err)
	}
	if pass.Missing != 0 || pass.Redriven != 0 || len(pass.ReplayIDs) != 0 {
		t.Errorf("pass: %+v, want nothing missing or re-driven", pass)
	}
	res, err := rp.Reconcile(ctx, replayer.ReconcileRequest{FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rejected != 2 || len(res.Missing) != 0 || res.Fix != nil {
		t.Errorf("reconcile: %+v, want the two malformed messages rejected, none missing", res.ReconcileResult)
	}
	r.settled()
	for id := range malformed {
		if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key(id).String()); n != 0 {
			t.Errorf("%s: the handler ran %d times", id, n)
		}
		if n := r.count(`SELECT count(*) FROM intake.inbox WHERE event_id = $1`, id); n != 0 {
			t.Errorf("%s: %d inbox rows", id, n)
		}
	}
}

// TestRedriveNotHeldOffByViewers reproduces issue 30's item 8: viewers'
// reconciles could take every slot, and the re-drive then waited a minute
// and failed. A viewer holds at most one slot (a second viewer reconcile
// gets 429), and with every API slot held a re-drive pass runs at once.
func TestRedriveNotHeldOffByViewers(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	r.publish("evt_1", "evt_2")
	r.settled()
	r.loseCommits("evt_1")
	rp, _ := r.newReplayer(replayer.Options{RedriveInterval: -1}) // max_running: 2
	r.runReplayer(rp)
	router := chi.NewRouter()
	rp.Mount(router)
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)
	reconcile := func(token string) int {
		t.Helper()
		_, err := apiclient.New(srv.URL, token, nil).Reconcile(context.Background(), apiclient.ReconcileQuery{FromSeq: 1})
		if ae := (*apiclient.Error)(nil); errors.As(err, &ae) {
			return ae.Status
		}
		if err != nil {
			t.Fatal(err)
		}
		return http.StatusOK
	}

	release, err := replayer.HoldReconcile(rp, true) // a viewer's reconcile in progress
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	if code := reconcile(viewerToken); code != http.StatusTooManyRequests {
		t.Errorf("a second viewer reconcile: %d, want 429", code)
	}
	release, err = replayer.HoldReconcile(rp, false) // and an operator's: every API slot held
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	if code := reconcile(operatorToken); code != http.StatusTooManyRequests {
		t.Errorf("an operator reconcile beyond max_running: %d, want 429", code)
	}

	// At once: well inside the minute the re-drive used to wait for a slot.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pass, err := rp.RedrivePass(ctx, apiclient.RedriveFailover)
	if err != nil || pass.Redriven != 1 {
		t.Fatalf("re-drive pass with every API slot held: %+v, %v; want evt_1 re-driven", pass, err)
	}
	r.waitReplay(pass.ReplayIDs[0], "done")
	r.settled()
	r.processedOnce("evt_1", "evt_2")
}
