package chaos_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/chaos"
	"github.com/intakehq/intake/internal/harness/pgcluster"
	"github.com/intakehq/intake/internal/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestChaos is the CI-sized run of `intake bench chaos`: the same harness
// with 1,000 events and fewer faults, still real ones — separate ingress,
// processor and NATS processes, processors killed with SIGKILL (one of them
// between a commit and its acks), NATS killed and restarted (in the cluster:
// the stream leader), Postgres stopped and started, responses dropped — and
// the same verdict; once more with the business row written by a SQL
// handler in the config instead of the Go one. The full run is `make chaos`.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: skipped with -short")
	}
	bin := buildIntake(t)
	for _, tc := range []struct {
		name    string
		cluster bool
		handler string
	}{
		{"single", false, ""},
		{"cluster", true, ""},
		// The business row from a SQL handler in the config, which the
		// stock processor loads (`intake bench chaos --handler sql`).
		{"sql-handler", false, chaos.HandlerSQL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := chaos.Options{
				Binary:         bin,
				Events:         1000,
				Rate:           60,
				ProcessorKills: 3,
				Cluster:        tc.cluster,
				Handler:        tc.handler,
				Seed:           uint64(time.Now().UnixNano()),
				Timeout:        4 * time.Minute,
				Log:            testLog{t},
			}
			res, err := chaos.Run(context.Background(), o)
			if errors.Is(err, pgcluster.ErrNoBinaries) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatalf("chaos run (seed %d): %v", o.Seed, err)
			}
			t.Log("\n" + res.Summary())
			t.Log(res.Line())
			if !res.OK() {
				t.Errorf("chaos verdict (seed %d): %s", o.Seed, res.Line())
			}
			if res.ProcessorKills < 3 || res.NATSFaults != 1 || res.PostgresFaults != 1 || res.LostResponses == 0 {
				t.Errorf("faults not all injected: %d kills, %d NATS, %d Postgres, %d responses dropped",
					res.ProcessorKills, res.NATSFaults, res.PostgresFaults, res.LostResponses)
			}
			if res.LatePastWindow == 0 || res.Stale == 0 {
				t.Errorf("the run did not exercise the inbox: %d late deliveries past the window, %d stale", res.LatePastWindow, res.Stale)
			}
		})
	}
}

// TestChaosFailover is the CI-sized run of `intake bench chaos --failover`:
// Postgres as a primary and a streaming standby, failed over mid-run (the
// standby cut off for 2s, the primary killed with SIGKILL, the standby
// promoted, the old primary back as a standby), with processor kills, the
// NATS fault and every delivery at least twice in parallel — and the same
// verdict: no duplicate effect, no lost event. Synchronously replicated,
// the commits in flight at the kill have an unknown outcome the inbox
// resolves; asynchronously, acknowledged commits are lost with the primary
// and only the re-drive brings their events back.
func TestChaosFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: skipped with -short")
	}
	bin := buildIntake(t)
	for _, tc := range []struct {
		name  string
		async bool
		noCut bool
	}{
		{"sync", false, false},
		{"async", true, false},
		// The standby stays connected, its walreceiver paused before the
		// kill and resumed after: commits that reached it while their
		// client saw the connection drop come back as Redelivered.
		{"sync-nocut", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.async && !chaos.RedriveKeysKnown() {
				t.Skip("asynchronous failover loses acknowledged commits with the primary, and only the replayer's " +
					"re-drive brings their events back: this build's config has no api.redrive_interval yet")
			}
			o := chaos.Options{
				Binary:         bin,
				Events:         1000,
				Rate:           60,
				ProcessorKills: 2,
				Failover:       true,
				Async:          tc.async,
				NoCut:          tc.noCut,
				Seed:           uint64(time.Now().UnixNano()),
				Timeout:        4 * time.Minute,
				Log:            testLog{t},
			}
			res, err := chaos.Run(context.Background(), o)
			if errors.Is(err, pgcluster.ErrNoBinaries) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatalf("chaos run (seed %d): %v", o.Seed, err)
			}
			t.Log("\n" + res.Summary())
			t.Log(res.Line())
			if !res.OK() {
				t.Errorf("chaos verdict (seed %d): %s", o.Seed, res.Line())
			}
			if res.PostgresFaults != 1 || res.PostgresRejoins != 1 {
				t.Errorf("failover not carried out: %d failovers, %d rejoins", res.PostgresFaults, res.PostgresRejoins)
			}
			// Asynchronously, the 2s of commits the standby never saw are lost
			// with the primary: a run with nothing re-driven did not test the
			// re-drive (or the count is read from the wrong place: see
			// redrivenFromAudit).
			if tc.async && max(res.RedrivenAudit, res.RedrivenMetric) <= 0 {
				t.Errorf("nothing re-driven after an asynchronous failover (intake.replays %d, metric %d)",
					res.RedrivenAudit, res.RedrivenMetric)
			}
			// The verdict fails a failover that did not bite; this says so
			// here too, in case the verdict's check is ever lost.
			if res.WALAfterCut <= 0 || res.DBFailures <= 0 {
				t.Errorf("the failover did not bite: %d bytes of WAL before the kill, %d database failures logged",
					res.WALAfterCut, res.DBFailures)
			}
			if tc.noCut {
				// Reported, not required: whether a commit in flight had
				// reached the standby at the kill is the timing's to decide.
				t.Logf("no cut: %d redelivered outcomes at the kill on %d processors (clean of processor kills: %v)",
					res.RedeliveredAtKill, res.RedeliveredProcs, res.RedeliveredClean)
			}
		})
	}
}

// TestChaosNegativeControl runs the harness against processors that write
// the business row outside the inbox transaction and retry after it: the
// verdict must catch the duplicates, or a passing TestChaos proves nothing.
func TestChaosNegativeControl(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: skipped with -short")
	}
	o := chaos.Options{
		Binary: buildIntake(t), Events: 300, Rate: 100, Control: true,
		ProcessorKills: -1, NoNATSFault: true, NoPostgresFault: true,
		Seed: uint64(time.Now().UnixNano()), Timeout: 3 * time.Minute, Log: testLog{t},
	}
	res, err := chaos.Run(context.Background(), o)
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("chaos control run (seed %d): %v", o.Seed, err)
	}
	t.Log(res.Line())
	if res.OK() || res.DuplicateEffects == 0 {
		t.Fatalf("the negative control passed (%d duplicate effects): the verdict does not see what it claims to", res.DuplicateEffects)
	}
}

// buildIntake returns the intake binary, built once per test binary and
// shared by every test that runs it.
func buildIntake(t *testing.T) string {
	t.Helper()
	return testenv.GoBuild(t, "github.com/intakehq/intake/cmd/intake")
}

// testLog sends the harness's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
