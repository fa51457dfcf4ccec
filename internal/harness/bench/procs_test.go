package bench

import (
	"math"
	"testing"
)

func TestShares(t *testing.T) {
	got := shares([]float64{100, 50, 0}, []float64{400, 350, 250})
	want := []float64{300.0 / 850, 300.0 / 850, 250.0 / 850}
	for i := range want {
		if !near(got[i], want[i]) {
			t.Fatalf("shares = %v, want %v", got, want)
		}
	}
	if got := shares([]float64{5}, []float64{5}); got[0] != 0 {
		t.Errorf("nothing committed in the window: shares %v", got)
	}
}

func TestFmtShares(t *testing.T) {
	if got := fmtShares([]float64{0.26, 0.251, 0.244, 0.248}); got != "26/25/24/25 %" {
		t.Errorf("fmtShares = %q", got)
	}
}

func TestCheckProcessors(t *testing.T) {
	if err := checkProcessors([]int{1, 2, 4}); err != nil {
		t.Error(err)
	}
	for _, bad := range [][]int{{0}, {1, -2}, {maxProcessors + 1}} {
		if checkProcessors(bad) == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestMergeCosts: two drains of one stage weigh by their events.
func TestMergeCosts(t *testing.T) {
	a := PGCost{Stage: "s", Payload: 1024, Events: 1000, WALBytes: 4000, CPUMicros: 40,
		Tables: []TableCost{{Table: "intake.inbox", Rows: 1, IndexEntries: 4, TableBytes: 200, IndexBytes: 100}}}
	b := PGCost{Stage: "s", Payload: 1024, Events: 3000, WALBytes: 2000, CPUMicros: 60,
		Tables: []TableCost{{Table: "intake.inbox", Rows: 1, IndexEntries: 4, TableBytes: 600, IndexBytes: 300}}}
	got := mergeCosts([]PGCost{a, b})
	want := PGCost{Stage: "s", Payload: 1024, Events: 4000, WALBytes: 2500, CPUMicros: 55,
		Tables: []TableCost{{Table: "intake.inbox", Rows: 1, IndexEntries: 4, TableBytes: 500, IndexBytes: 250}}}
	if got.Stage != want.Stage || got.Events != want.Events || !near(got.WALBytes, want.WALBytes) || !near(got.CPUMicros, want.CPUMicros) ||
		len(got.Tables) != 1 || !near(got.Tables[0].TableBytes, 500) || !near(got.Tables[0].IndexBytes, 250) ||
		!near(got.Tables[0].Rows, 1) || !near(got.Tables[0].IndexEntries, 4) {
		t.Errorf("mergeCosts = %+v, want %+v", got, want)
	}
	if got := mergeCosts(nil); got.Events != 0 {
		t.Errorf("mergeCosts(nil) = %+v", got)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
