package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
)

// TestDefaultStages runs `intake bench --quick`'s stages at a size CI
// affords, so the default run — the one BENCHMARKS.md's ratios come from —
// cannot rot: every stage measured, every ratio reported, and the machine's
// CPU per event read for the references and the roles the "most the cores
// allow" bounds add. Nothing is timed; the figures must be there.
func TestDefaultStages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ingress and processor processes against Postgres and NATS: skipped with -short")
	}
	c := Config{
		Binary:      testenv.GoBuild(t, "github.com/intakehq/intake/cmd/intake"),
		Quick:       true,
		Duration:    time.Second,
		Connections: 8,
		Payloads:    []int{1024},
	}
	rep := runStage(t, c)
	figures := map[string]Figure{}
	for _, f := range rep.Figures {
		figures[f.Stage] = f
	}
	for _, stage := range []string{"bare HTTP (reference a)", "bare HTTP + PubAck (reference f)", "intake ingress, saturation", "raw JetStream publish, sync (reference b)",
		"raw JetStream publish, async (reference b)", "processor's JetStream work (reference e)", "the processor's parts in one loop (reference c+e)", "Postgres batched-insert limit (reference c)", "intake processor, committed"} {
		f, ok := figures[stage]
		switch {
		case !ok || f.Rate <= 0:
			t.Errorf("%s: not measured (%+v)", stage, f)
		case !strings.Contains(f.Note, "machine CPU") || strings.Contains(f.Note, "machine CPU 0.000"):
			t.Errorf("%s: no machine CPU per event in %q", stage, f.Note)
		}
	}
	ratios := map[string]float64{}
	for _, r := range rep.Ratios {
		ratios[r.Name] = r.Value
	}
	for _, name := range []string{"ingress / bare HTTP", "processor / batched-insert limit",
		"bare HTTP + PubAck (f) / bare HTTP", "ingress / bare HTTP + PubAck (f)",
		"processor's parts in one loop (c+e) / batched-insert limit", "processor / its parts in one loop (c+e)",
		"ingress / bare HTTP, the most the cores allow", "ingress CPU per event / (a) + (b sync)",
		"processor / batched-insert limit, the most the cores allow", "processor CPU per event / (c) + (e)",
		"processor / batched-insert limit, at most: (c) + a publish",
		"e2e p99 / ingress p99 at half load", "ingress peak RSS MiB at saturation"} {
		if v, ok := ratios[name]; !ok || v <= 0 {
			t.Errorf("%s: %v (reported: %t), want a positive figure", name, v, ok)
		}
	}
}
