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
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
)

// runMainEnv makes this test binary the intake binary: re-executed with it
// set, TestIntakeMain runs main with the arguments after "--".
const runMainEnv = "INTAKE_TEST_RUN_MAIN"

// TestIntakeMain is not a test: it is `intake` for the exit-code tests,
// which re-execute the test binary rather than build the command.
func TestIntakeMain(t *testing.T) {
	if os.Getenv(runMainEnv) != "1" {
		t.Skip("runs only as the intake binary of an exit-code test")
	}
	for i, a := range os.Args {
		if a == "--" {
			os.Args = append([]string{"intake"}, os.Args[i+1:]...)
			break
		}
	}
	main()
}

// TestProcessorThatCannotConsumeExitsNonZero: `intake processor` whose
// consumer JetStream refuses exits non-zero, saying why, instead of running
// (and restarting the consumer) forever.
func TestProcessorThatCannotConsumeExitsNonZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n, dbURL, path, cfg, js := roleDeps(t)

	// A durable "processor" whose deliver policy JetStream will not update
	// to the processor's.
	cc := stream.ProcessorConsumerConfig(cfg.Processor)
	cc.DeliverPolicy = jetstream.DeliverNewPolicy
	if _, err := js.CreateConsumer(ctx, envelope.StreamIn, cc); err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(runCtx, os.Args[0], "-test.run=^TestIntakeMain$", "--",
		"processor", "--config", path, "--http-addr", "127.0.0.1:0", "--log-format", "text")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "INTAKE_NATS_URL="+n.URL(), "DATABASE_URL="+dbURL)
	out, err := cmd.CombinedOutput()
	if runCtx.Err() != nil {
		t.Fatalf("intake processor did not exit:\n%s", out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("intake processor exited with %v, want a non-zero status:\n%s", err, out)
	}
	if !strings.Contains(string(out), "deliver policy can not be updated") {
		t.Fatalf("intake processor did not say why it exited:\n%s", out)
	}
	t.Logf("exit status %d:\n%s", ee.ExitCode(), out)
}

// roleDeps is what a role command needs to start: a nats-server with the
// streams, a migrated database, and a config file with one integration
// (path, and as parsed).
func roleDeps(t *testing.T) (n *testenv.NATSServer, dbURL, path string, cfg *config.Config, js jetstream.JetStream) {
	t.Helper()
	ctx := context.Background()
	n = testenv.NATS(t)
	dbURL = testenv.Postgres(t)
	if err := store.Migrate(ctx, dbURL, nil); err != nil {
		t.Fatal(err)
	}
	const yaml = `
integrations:
  - {name: demo, provider: standard, tenant: acme, account: main, secrets: ["whsec_b3duLXNlY3JldC1vZi10aGlzLXRlc3Q="]}
`
	path = filepath.Join(t.TempDir(), "intake.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ = jetstream.New(nc)
	if err := stream.Ensure(ctx, js, cfg.NATS.Stream); err != nil {
		t.Fatal(err)
	}
	return n, dbURL, path, cfg, js
}
