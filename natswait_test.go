package intake_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
)

// TestIngressWaitsForAnUnresolvableNATSName: a NATS name that does not
// resolve yet (a Service not published, DNS catching up) is waited for
// like a refused dial, until the start budget (here ctx's, shorter) ends.
func TestIngressWaitsForAnUnresolvableNATSName(t *testing.T) {
	t.Parallel()
	cfg := testrig.ParseConfig(t, testConfig)
	cfg.NATS.URL = "nats://intake-nats-does-not-exist.invalid:4222"
	var logs testenv.Buffer
	const budget = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	_, err := intake.New(ctx, cfg, intake.Options{Roles: intake.Roles{Ingress: true}, HTTPAddr: "127.0.0.1:0",
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err == nil {
		t.Fatal("app.New connected to a name that does not resolve")
	}
	if !strings.Contains(logs.String(), "waiting for nats") {
		t.Errorf("app.New did not wait for NATS: %v; logs:\n%s", err, logs.String())
	}
	if elapsed := time.Since(start); elapsed < budget-500*time.Millisecond {
		t.Errorf("app.New gave up after %v, before the start budget (%v): %v", elapsed, budget, err)
	}
}

// TestNATSRefusingThePasswordFailsAtOnce: a server that answers and refuses
// the credentials is not waited for; no retry can mend a wrong password.
func TestNATSRefusingThePasswordFailsAtOnce(t *testing.T) {
	t.Parallel()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT,
		Username: "ingress", Password: "right", NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	cfg := testrig.ParseConfig(t, testConfig)
	cfg.NATS.URL, cfg.NATS.User, cfg.NATS.Password = s.ClientURL(), "ingress", "wrong"
	var logs testenv.Buffer
	_, err = intake.New(context.Background(), cfg, intake.Options{Roles: intake.Roles{Ingress: true}, HTTPAddr: "127.0.0.1:0",
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("app.New = %v, want nats.ErrAuthorization", err)
	}
	if strings.Contains(logs.String(), "waiting for nats") {
		t.Errorf("app.New waited after the server refused the password; logs:\n%s", logs.String())
	}
}
