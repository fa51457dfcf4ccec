package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
)

// TestPostmasterPID: the system stage finds the postmaster of the cluster
// `intake dev` started under its data dir, wherever below it the data
// directory is, and says so when there is none.
func TestPostmasterPID(t *testing.T) {
	dir := t.TempDir()
	if _, err := postmasterPID(dir); err == nil {
		t.Error("no postmaster.pid: no error")
	}
	data := filepath.Join(dir, "postgres", "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "postmaster.pid"), []byte("4242\n/x/data\n1700000000\n5432\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pid, err := postmasterPID(dir); err != nil || pid != 4242 {
		t.Errorf("postmasterPID = %d, %v; want 4242", pid, err)
	}
}

// TestSystemIsARunOfItsOwn: --system replaces the stages, like the other
// comparisons, and gets the 20 s load issue 35's figures were taken with.
func TestSystemIsARunOfItsOwn(t *testing.T) {
	if err := (Config{System: true, Prefill: 10}).validate(); err == nil {
		t.Error("--system with --prefill: no error")
	}
	c, err := Config{System: true}.withDefaults()
	if err != nil || c.Duration.Seconds() != 20 {
		t.Errorf("system defaults: %v, %v; want 20s", c.Duration, err)
	}
}

// TestSystemStage runs `intake bench --system` at a size CI affords, so the
// stage and its floor cannot rot: `intake dev` under load for a second,
// drained, then the floor's references on its own servers. Nothing is
// timed; the figures must be there, each part of the floor measured.
func TestSystemStage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs intake dev with its Postgres and NATS: skipped with -short")
	}
	c := Config{
		Binary:      testenv.GoBuild(t, "github.com/intakehq/intake/cmd/intake"),
		System:      true,
		Duration:    time.Second,
		Connections: 8,
		Payloads:    []int{1024},
	}
	rep := runStage(t, c)
	got := map[string]float64{}
	for _, r := range rep.Ratios {
		got[r.Name] = r.Value
	}
	for _, name := range []string{"system CPU ms per event as deployed", "floor CPU ms per event (a' + b' + e' + c')",
		"floor with the inbox claim alone for c'", "system CPU per event / floor"} {
		if v, ok := got[name]; !ok || v <= 0 {
			t.Errorf("%s: %v (reported: %t), want a positive figure", name, v, ok)
		}
	}
}
