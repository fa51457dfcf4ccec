package intake_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
)

// sharedConfig is one file for every role, as the chart and compose give
// it: each secret a ${VAR} that only the role using it has in its
// environment.
const sharedConfig = `
api:
  tokens:
    - {name: ops, token: "${TEST_OPERATOR_TOKEN}", role: operator}
envelope:
  keys: ["${TEST_ENVELOPE_KEY}"]
integrations:
  - {name: demo, provider: standard, tenant: acme, account: main, secrets: ["${TEST_DEMO_SECRET}"]}
`

const (
	roleDemoSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	roleToken      = "operator-token-0123456789"
	roleEnvelope   = "role-envelope-key-0123456789abcdefgh"
)

// env is a process environment holding only vars.
func env(vars ...string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		for i := 0; i+1 < len(vars); i += 2 {
			if vars[i] == k {
				return vars[i+1], true
			}
		}
		return "", false
	}
}

// startRole loads sharedConfig as the process of roles does, with lookup as
// its environment, and starts it against a fresh NATS and database.
func startRole(t *testing.T, roles intake.Roles, lookup func(string) (string, bool)) (*config.Config, string) {
	t.Helper()
	cfg, err := config.ParseFor([]byte(sharedConfig), lookup, roles.Secrets())
	if err != nil {
		t.Fatalf("the role does not start without the other roles' secrets: %v", err)
	}
	n := testenv.NATS(t)
	dbURL := testenv.Postgres(t)
	if err := store.Migrate(context.Background(), dbURL, nil); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := stream.Ensure(ctx, js, cfg.NATS.Stream); err != nil {
		t.Fatal(err)
	}
	cfg.NATS.URL, cfg.Postgres.URL = n.URL(), dbURL
	a := startApp(t, cfg, intake.Options{Roles: roles})
	base := "http://" + a.Addr().String()
	if code := status(t, http.DefaultClient, base+"/readyz", nil, nil); code != http.StatusOK {
		t.Fatalf("readyz %d", code)
	}
	return cfg, base
}

// TestIngressStartsWithoutAPITokens: ingress, with only the webhook secret
// in its environment, starts, verifies, and holds no operator token.
func TestIngressStartsWithoutAPITokens(t *testing.T) {
	cfg, base := startRole(t, intake.Roles{Ingress: true}, env("TEST_DEMO_SECRET", roleDemoSecret, "TEST_ENVELOPE_KEY", roleEnvelope))
	if len(cfg.API.Tokens) != 0 {
		t.Fatalf("ingress loaded api.tokens: %d", len(cfg.API.Tokens))
	}
	in, _ := cfg.Integration("demo")
	body := []byte(`{"id":"evt_1","type":"invoice.paid"}`)
	h, err := provider.Sign(in.Config, 0, "evt_1", body, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if code := status(t, http.DefaultClient, base+"/webhooks/demo", body, h); code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("a signed delivery got %d", code)
	}
}

// TestReplayerStartsWithoutWebhookSecrets: the replayer, with only the
// operator token in its environment, starts and authenticates; given the
// webhook secret's variable too, it still does not load it.
func TestReplayerStartsWithoutWebhookSecrets(t *testing.T) {
	_, base := startRole(t, intake.Roles{Replayer: true}, env("TEST_OPERATOR_TOKEN", roleToken))
	h := http.Header{"Authorization": {"Bearer " + roleToken}}
	if code := status(t, http.DefaultClient, base+"/api/v1/conflicts", nil, h); code != http.StatusOK {
		t.Fatalf("the operator token got %d", code)
	}
	cfg, err := config.ParseFor([]byte(sharedConfig), env("TEST_OPERATOR_TOKEN", roleToken, "TEST_DEMO_SECRET", roleDemoSecret,
		"TEST_ENVELOPE_KEY", roleEnvelope), intake.Roles{Replayer: true}.Secrets())
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Integrations[0].Secrets; len(s) != 0 {
		t.Fatalf("the replayer loaded the webhook secret")
	}
	if len(cfg.Envelope.Keys) != 0 {
		t.Fatalf("the replayer loaded the envelope key")
	}
}

// TestProcessorStartsWithNeitherSecret: the processor verifies no webhook
// and serves no API: it starts with only the envelope key set, and loads
// it (it verifies envelopes).
func TestProcessorStartsWithNeitherSecret(t *testing.T) {
	cfg, _ := startRole(t, intake.Roles{Processor: true}, env("TEST_ENVELOPE_KEY", roleEnvelope))
	if len(cfg.API.Tokens) != 0 || len(cfg.Integrations[0].Secrets) != 0 {
		t.Fatal("the processor loaded a secret")
	}
	if len(cfg.Envelope.Keys) != 1 {
		t.Fatal("the processor did not load the envelope key")
	}
}

// TestARoleRefusesAConfigWithoutItsSecrets: a config loaded for the
// replayer cannot start ingress (which would then verify with nothing).
func TestARoleRefusesAConfigWithoutItsSecrets(t *testing.T) {
	cfg, err := config.ParseFor([]byte(sharedConfig), env("TEST_OPERATOR_TOKEN", roleToken), config.APITokens)
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.URL = "nats://127.0.0.1:1"
	_, err = intake.New(context.Background(), cfg, intake.Options{Roles: intake.Roles{Ingress: true}})
	if err == nil || !strings.Contains(err.Error(), "without secrets") {
		t.Fatalf("New: %v", err)
	}
}
