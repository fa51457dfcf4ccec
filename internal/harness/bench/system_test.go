package bench

import (
	"os"
	"path/filepath"
	"testing"
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
