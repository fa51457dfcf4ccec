package replayer_test

import (
	"context"
	"fmt"
	"log/slog"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/faultproxy"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

// partitionFor is how long the partition lasts, as in the module root's
// partition tests: longer than the connection's own deadlines (connect
// 5s, TCP user timeout 15s).
const partitionFor = 20 * time.Second

// holdCommits makes the commit of every replay after the first wait, on
// the server, while the test holds advisory lock 4242: a deferred trigger
// runs at COMMIT and takes the lock shared. It returns the release.
func (r *rig) holdCommits() (release func()) {
	r.t.Helper()
	ctx := context.Background()
	if _, err := r.db.Exec(ctx, `
		CREATE FUNCTION hold_replay_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF (SELECT count(*) FROM intake.replays) >= 2 THEN
				PERFORM pg_advisory_xact_lock_shared(4242);
			END IF;
			RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER hold_replay_commit AFTER INSERT ON intake.replays
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION hold_replay_commit();`); err != nil {
		r.t.Fatal(err)
	}
	conn, err := r.db.Acquire(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(4242)`); err != nil {
		conn.Release()
		r.t.Fatal(err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
			r.t.Error(err)
		}
		conn.Release()
	}
	r.t.Cleanup(release)
	return release
}

// TestARedrivePassCaughtByAPostgresPartition: the replayer's flows to
// Postgres hang (blackholed) in the middle of a re-drive pass: its first
// replay is recorded, the second one's commit waits on the server (held
// by the test) when the partition begins, and the server then commits it
// with its answer lost. The pass fails visibly — its error in
// RedriveStatus (GET /api/v1/redrive) and an error log line — once its
// call's bound ends, instead of hanging; after the heal the next passes
// resume, the replay whose commit nobody heard is run, not started again,
// and every lost event is processed once, from one copy, and no session
// keeps an advisory lock or a transaction open.
func TestARedrivePassCaughtByAPostgresPartition(t *testing.T) {
	t.Parallel()
	const events, span = 120, 30 // four reconciles of 30 in a pass
	r := setup(t)
	testrig.StartApp(t, r.cfg, intake.Options{Roles: intake.Roles{Processor: true}, Handler: r.handler()})
	ctx := context.Background()
	var ids, lost []string
	for i := range events {
		ids = append(ids, fmt.Sprintf("evt_%d", i))
		if i%4 == 0 {
			lost = append(lost, ids[i]) // lost commits in every reconcile's range
		}
	}
	r.publish(ids...)
	r.settled()
	r.loseCommits(lost...)
	release := r.holdCommits()

	// The replayer reaches Postgres through the fault proxy.
	u, err := neturl.Parse(r.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := faultproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Close() })
	u.Host = pg.Addr()
	st, err := store.Open(ctx, u.String(), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	logs := &testenv.Buffer{}
	rp, _ := r.newReplayer(replayer.Options{Store: st, RedriveInterval: -1, ReconcileMaxSpan: span,
		ResumeInterval: time.Second, Log: slog.New(slog.NewTextHandler(logs, nil))})
	r.runReplayer(rp) // publishes the replays the passes start

	type result struct {
		pass apiclient.Redrive
		err  error
	}
	done := make(chan result, 1)
	go func() {
		p, err := rp.RedrivePass(ctx, apiclient.RedriveFailover)
		done <- result{p, err}
	}()
	testenv.Eventually(t, time.Minute, func() bool {
		return r.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND wait_event = 'advisory'`) == 1
	}, "the pass's second replay never reached its commit")

	pg.SetMode(faultproxy.Blackhole)
	cut := time.Now()
	release() // the server commits the second replay; its answer goes nowhere
	testenv.Eventually(t, 30*time.Second, func() bool { return r.count(`SELECT count(*) FROM intake.replays`) == 2 },
		"the second replay was not committed")
	time.Sleep(partitionFor - time.Since(cut)) // the partition's length is the scenario
	pg.SetMode(faultproxy.Pass)
	healed := time.Now()

	var caught result
	select {
	case caught = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the re-drive pass caught by the partition still hangs 2 minutes after the heal")
	}
	t.Logf("the caught pass failed %s after the partition began: %v", time.Since(cut).Round(100*time.Millisecond), caught.err)
	if caught.err == nil || caught.pass.Error == "" || len(caught.pass.ReplayIDs) != 1 {
		t.Fatalf("caught pass: %+v, %v; want an error after one replay", caught.pass, caught.err)
	}
	if s := rp.RedriveStatus(); len(s.Passes) != 1 || s.Passes[0].Error == "" {
		t.Fatalf("status: %+v, want the failed pass with its error", s)
	}
	if !strings.Contains(logs.String(), `level=ERROR msg="re-drive pass failed"`) {
		t.Fatalf("no error line for the failed pass: %s", logs)
	}

	// The next passes go on where it stopped, until nothing is missing.
	passes := 0
	testenv.Eventually(t, 2*time.Minute, func() bool {
		p, err := rp.RedrivePass(ctx, apiclient.RedriveScheduled)
		passes++
		if err != nil {
			t.Logf("pass %d after the heal failed %s after it: %v", passes, time.Since(healed).Round(100*time.Millisecond), err)
		}
		return err == nil && p.Missing == 0 &&
			r.count(`SELECT count(*) FROM intake.replays WHERE state <> 'done'`) == 0
	}, "the re-drive never finished after the heal")
	t.Logf("every lost event re-driven %s after the heal, %d passes after the caught one",
		time.Since(healed).Round(100*time.Millisecond), passes)
	r.settled()
	r.processedOnce(lost...)
	if n := r.count(`SELECT count(*) FROM effects`); n != events {
		t.Errorf("%d business rows, want %d: one each (the lost ones' went with their commits)", n, events)
	}
	copies := map[string]int{}
	for _, m := range r.tr.Messages(t, envelope.StreamIn) {
		if m.Header.Get(envelope.HeaderReplayID) != "" {
			copies[m.Header.Get(envelope.HeaderKey)]++
		}
	}
	for _, k := range keysOf(lost...) {
		if copies[k] != 1 {
			t.Errorf("%s: %d re-drive copies in INTAKE_IN, want 1", k, copies[k])
		}
		delete(copies, k)
	}
	for k, n := range copies {
		t.Errorf("%s was not lost and has %d replay copies", k, n)
	}
	// One replay per reconcile with lost commits: the second, whose
	// commit nobody heard, was run, not started again.
	if n := r.count(`SELECT count(*) FROM intake.replays WHERE requested_by = $1 AND state = 'done'`, replayer.RedriveRequester); n != events/span {
		t.Errorf("%d re-drive replays done, want %d, one per reconcile", n, events/span)
	}
	if n := r.count(`SELECT count(*) FROM intake.replays WHERE requested_by <> $1`, replayer.RedriveRequester); n != 0 {
		t.Errorf("%d replays not the re-drive's", n)
	}
	testenv.Eventually(t, time.Minute, func() bool {
		return r.count(`SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
			WHERE l.locktype = 'advisory' AND d.datname = current_database()`) == 0
	}, "an advisory lock is still held after the re-drive finished")
	testenv.Eventually(t, time.Minute, func() bool {
		return r.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND state LIKE 'idle in transaction%'`) == 0
	}, "a session is still idle in a transaction after the re-drive finished")
}
