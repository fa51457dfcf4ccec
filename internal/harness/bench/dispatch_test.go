package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// runStage runs the harness with c, logs its report, and stops the test
// on an error.
func runStage(t *testing.T, c Config) *Report {
	t.Helper()
	rep, err := Run(context.Background(), c)
	if rep != nil {
		var b strings.Builder
		_ = rep.Print(&b, false)
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestDispatchStage runs `intake bench --dispatch` at a size CI affords, so
// the stage cannot rot: 300 messages per throughput pass, the destination
// down for 3 s (on the schedule --quick uses, the defaults / 60), one
// SIGKILL of the dispatcher process. Nothing is timed here; the verdicts
// come from the receiver's record: nothing lost, every duplicate under
// its message's webhook-id.
func TestDispatchStage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs intake dispatcher processes against Postgres and NATS: skipped with -short")
	}
	c := Config{
		Binary:           testenv.GoBuild(t, "github.com/intakehq/intake/cmd/intake"),
		Dispatch:         true,
		Quick:            true,
		Duration:         time.Second,
		Payloads:         []int{1024},
		DispatchMessages: 300,
		Outage:           3 * time.Second,
		DispatchKills:    1,
		DispatchRate:     100,
	}
	rep := runStage(t, c)
	got := map[string]DeliveryCheck{}
	for _, ck := range rep.Deliveries {
		got[ck.Scenario] = ck
	}
	for _, name := range []string{"outage", "kills"} {
		ck, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: not run", name)
		case ck.Published == 0 || ck.Lost != 0 || ck.OtherID != 0 || ck.Unknown != 0 || ck.BadSignatures != 0:
			t.Errorf("%s: %d published, %d lost, %d under another webhook-id, %d unknown, %d bad signatures",
				name, ck.Published, ck.Lost, ck.OtherID, ck.Unknown, ck.BadSignatures)
		case ck.Received != ck.Published || ck.Unlogged != 0 || ck.Failed != 0:
			t.Errorf("%s: %d of %d received; the delivery log: %d without a delivered row, %d failed", name, ck.Received, ck.Published, ck.Unlogged, ck.Failed)
		}
	}
	if ck := got["outage"]; ck.AttemptsDuringOutage == 0 {
		t.Errorf("outage: no attempt during the outage: the destination was never down while messages flowed")
	}
	if ck := got["kills"]; ck.Kills != 1 {
		t.Errorf("kills: %d kills, want 1", ck.Kills)
	}
	// The three senders each delivered: the bare client in its own
	// process (the limit), the same client in the receiver's process, and
	// the dispatcher; the limit's client CPU is its process's own.
	for _, stage := range []string{"bare HTTP client → receiver (limit)", "bare HTTP client in the receiver's process", "intake dispatcher → receiver"} {
		i := slices.IndexFunc(rep.Figures, func(f Figure) bool { return f.Stage == stage })
		if i < 0 || rep.Figures[i].Rate <= 0 {
			t.Errorf("%s: not measured (%+v)", stage, rep.Figures)
		}
	}
	if i := slices.IndexFunc(rep.Figures, func(f Figure) bool { return f.Stage == "bare HTTP client → receiver (limit)" }); i >= 0 &&
		(!strings.Contains(rep.Figures[i].Note, "its own process") || strings.Contains(rep.Figures[i].Note, "client 0.000 ms")) {
		t.Errorf("the limit's client CPU is not its own process's: %s", rep.Figures[i].Note)
	}
	// The parts the dispatcher's bound adds: each ran and took CPU.
	for _, stage := range []string{"NATS: take and acknowledge (reference g)", "delivery log rows (reference h)"} {
		i := slices.IndexFunc(rep.Figures, func(f Figure) bool { return f.Stage == stage })
		if i < 0 || rep.Figures[i].Rate <= 0 || !strings.Contains(rep.Figures[i].Note, "machine CPU") {
			t.Errorf("%s: not measured (%+v)", stage, rep.Figures)
		}
	}
	if i := slices.IndexFunc(rep.Ratios, func(r Ratio) bool { return r.Name == "dispatcher / bare HTTP client, the most the cores allow" }); i < 0 || rep.Ratios[i].Value <= 0 {
		t.Errorf("no bound from the dispatcher's parts: %+v", rep.Ratios)
	}
}

// TestCheckDeliveries: the verdict counts a message lost when it never
// arrived, a duplicate under its own webhook-id as a duplicate only, and
// one under another id (or a first delivery under an id not its own) as
// unrecognisable.
func TestCheckDeliveries(t *testing.T) {
	published := map[string]string{"a": "id-a", "b": "id-b", "c": "id-c"}
	for name, tc := range map[string]struct {
		got                             map[string]receipt
		lost, dups, other, unknown, rcv int
	}{
		"all once": {got: map[string]receipt{"a": {n: 1, webhookIDs: []string{"id-a"}}, "b": {n: 1, webhookIDs: []string{"id-b"}},
			"c": {n: 1, webhookIDs: []string{"id-c"}}}, rcv: 3},
		"one lost": {got: map[string]receipt{"a": {n: 1, webhookIDs: []string{"id-a"}}, "b": {n: 1, webhookIDs: []string{"id-b"}}},
			lost: 1, rcv: 2},
		"duplicates under the same id": {got: map[string]receipt{"a": {n: 3, webhookIDs: []string{"id-a"}}, "b": {n: 2, webhookIDs: []string{"id-b"}},
			"c": {n: 1, webhookIDs: []string{"id-c"}}}, dups: 3, rcv: 3},
		"a duplicate under another id": {got: map[string]receipt{"a": {n: 2, webhookIDs: []string{"id-a", "other"}}, "b": {n: 1, webhookIDs: []string{"id-b"}},
			"c": {n: 1, webhookIDs: []string{"id-c"}}}, dups: 1, other: 1, rcv: 3},
		"not its own id": {got: map[string]receipt{"a": {n: 1, webhookIDs: []string{"id-b"}}, "b": {n: 1, webhookIDs: []string{"id-b"}},
			"c": {n: 1, webhookIDs: []string{"id-c"}}}, other: 1, rcv: 3},
		"never published": {got: map[string]receipt{"a": {n: 1, webhookIDs: []string{"id-a"}}, "b": {n: 1, webhookIDs: []string{"id-b"}},
			"c": {n: 1, webhookIDs: []string{"id-c"}}, "x": {n: 2, webhookIDs: []string{"id-x"}}}, unknown: 2, rcv: 3},
	} {
		t.Run(name, func(t *testing.T) {
			c := checkDeliveries(published, tc.got)
			if c.Published != 3 || c.Lost != tc.lost || c.Duplicates != tc.dups || c.OtherID != tc.other || c.Unknown != tc.unknown || c.Received != tc.rcv {
				t.Errorf("got %+v", c)
			}
			if ok := tc.lost == 0 && tc.other == 0 && tc.unknown == 0; c.OK() != ok {
				t.Errorf("OK() = %v, want %v (%s)", c.OK(), ok, c.Problems())
			}
		})
	}
}

// TestQuickSchedule: --quick's schedule is the defaults / 60, so its 5 s
// outage stands for the full run's 5 minutes.
func TestQuickSchedule(t *testing.T) {
	full, quick := scheduleFor(false), scheduleFor(true)
	if len(full.retry) != len(quick.retry) || full.breaker.Failures != quick.breaker.Failures {
		t.Fatalf("full %v, quick %v", full, quick)
	}
	for i := range full.retry {
		if d := full.retry[i]/scheduleScale - quick.retry[i]; d > time.Millisecond || d < -time.Millisecond {
			t.Errorf("retry[%d]: %s, quick %s", i, full.retry[i], quick.retry[i])
		}
	}
	if quick.breaker.Probe*scheduleScale != full.breaker.Probe {
		t.Errorf("probe %s, quick %s", full.breaker.Probe, quick.breaker.Probe)
	}
	if !strings.Contains(quick.String(), "83ms,1s,5s,30s,2m,6m") {
		t.Errorf("quick schedule reads %q", quick)
	}
}
