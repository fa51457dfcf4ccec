package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/envelope"
)

// runIntake runs `intake args…` (this test binary as intake) with env added
// and returns its output and exit status.
func runIntake(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^TestIntakeMain$", "--"}, args...)...)
	cmd.Env = append(append(os.Environ(), runMainEnv+"=1"), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("intake %v did not exit:\n%s", args, out)
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return string(out), 0
}

// TestMigrateCreatesTheStreams: `intake migrate` applies the SQL and then
// creates the streams the roles only check; the flags pick one half.
func TestMigrateCreatesTheStreams(t *testing.T) {
	t.Parallel()
	n := testenv.NATS(t)
	dbURL := testenv.Postgres(t)
	path := filepath.Join(t.TempDir(), "intake.yaml")
	if err := os.WriteFile(path, []byte(`
integrations:
  - {name: demo, provider: standard, tenant: acme, account: main, secrets: ["whsec_b3duLXNlY3JldC1vZi10aGlzLXRlc3Q="]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	db, natsURL := "DATABASE_URL="+dbURL, "INTAKE_NATS_URL="+n.URL()

	if out, code := runIntake(t, []string{db, natsURL}, "migrate", "--config", path, "--streams-only", "--no-streams"); code == 0 ||
		!strings.Contains(out, "exclude each other") {
		t.Fatalf("--streams-only --no-streams: exit %d\n%s", code, out)
	}
	if out, code := runIntake(t, []string{db}, "migrate", "--config", path); code == 0 || !strings.Contains(out, "nats.url") || strings.Contains(out, "migrations applied") {
		t.Fatalf("migrate without NATS: exit %d, want a refusal naming nats.url\n%s", code, out)
	}
	if out, code := runIntake(t, []string{db}, "migrate", "--config", path, "--no-streams"); code != 0 || strings.Contains(out, "streams ready") {
		t.Fatalf("migrate --no-streams: exit %d\n%s", code, out)
	}

	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, envelope.StreamIn); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("INTAKE_IN after migrate --no-streams: %v", err)
	}

	out, code := runIntake(t, []string{db, natsURL}, "migrate", "--config", path)
	if code != 0 || !strings.Contains(out, "migrations applied") || !strings.Contains(out, "streams ready") {
		t.Fatalf("migrate: exit %d\n%s", code, out)
	}
	for _, name := range []string{envelope.StreamIn, envelope.StreamOut, envelope.StreamReceipts} {
		if _, err := js.Stream(ctx, name); err != nil {
			t.Errorf("stream %s after migrate: %v", name, err)
		}
	}
	if out, code := runIntake(t, []string{natsURL}, "migrate", "--config", path, "--streams-only"); code != 0 ||
		strings.Contains(out, "migrations applied") || !strings.Contains(out, "streams ready") {
		t.Fatalf("migrate --streams-only (again, no database): exit %d\n%s", code, out)
	}
}
