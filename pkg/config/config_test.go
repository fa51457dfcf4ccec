package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/examples"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

const minimal = `
integrations:
  - name: demo
    provider: standard
    tenant: acme
    secrets: ["${SECRET}"]
`

func TestParseDefaults(t *testing.T) {
	cfg, err := Parse([]byte(minimal), env(map[string]string{"SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.NATS.Stream.MaxAge; got != 720*time.Hour {
		t.Errorf("max_age default = %v", got)
	}
	if got := cfg.NATS.Stream.DuplicateWindow; got != 10*time.Minute {
		t.Errorf("duplicate_window default = %v", got)
	}
	if got := cfg.Integrations[0].MaxBodyBytes; got != 1<<20 {
		t.Errorf("max_body_bytes default = %d", got)
	}
	if got := cfg.Integrations[0].Tolerance; got != 5*time.Minute {
		t.Errorf("tolerance default = %v", got)
	}
	if cfg.Integrations[0].Secrets[0] != "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" {
		t.Errorf("secret not expanded")
	}
}

func TestEnvOverrides(t *testing.T) {
	cfg, err := Parse([]byte(minimal+"postgres: {url: postgres://file}\nnats: {url: nats://file}\n"), env(map[string]string{
		"SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "DATABASE_URL": "postgres://env", "INTAKE_NATS_URL": "nats://env",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Postgres.URL != "postgres://env" || cfg.NATS.URL != "nats://env" {
		t.Errorf("overrides not applied: %q %q", cfg.Postgres.URL, cfg.NATS.URL)
	}
}

func TestExpansionKeepsSecretsVerbatim(t *testing.T) {
	// A secret full of YAML syntax must stay one string.
	weird := `a: b # "c" ${NOT} [x]`
	cfg, err := Parse([]byte(`
integrations:
  - name: h
    provider: hmac
    tenant: t
    secrets: ["${S}", "${MISSING:-fallback-secret}"]
    hmac: {header: X-Sig}
    event_id: {header: X-Id}
`), env(map[string]string{"S": weird}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Integrations[0].Secrets; got[0] != weird || got[1] != "fallback-secret" {
		t.Errorf("secrets = %q", got)
	}
}

func TestErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"unset env", minimal, nil, "SECRET is not set"},
		{"unknown key", "natz: {}\n", nil, "field natz not found"},
		{"bad name", "integrations: [{name: 'a b', provider: standard, tenant: t, secrets: [whsec_AAAA]}]", nil, "integrations[0] (a b).name"},
		{"no tenant", "integrations: [{name: a, provider: standard, secrets: [whsec_AAAA]}]", nil, "integrations[0] (a).tenant"},
		{"unknown provider", "integrations: [{name: a, provider: nope, tenant: t, secrets: [x]}]", nil, "integrations[0] (a).provider"},
		{"no secrets", "integrations: [{name: a, provider: standard, tenant: t}]", nil, "integrations[0] (a).secrets"},
		{"duplicate", "integrations: [{name: a, provider: standard, tenant: t, secrets: [whsec_AAAA]}, {name: a, provider: standard, tenant: t, secrets: [whsec_AAAA]}]", nil, "duplicate integration name"},
		{"short token", "api: {tokens: [{name: ops, token: short, role: operator}]}", nil, "api.tokens[0].token"},
		{"bad role", "api: {tokens: [{name: ops, token: 0123456789abcdef0123, role: admin}]}", nil, "api.tokens[0].role"},
		{"account slash", "integrations: [{name: a, provider: standard, tenant: t, account: 'x/y', secrets: [whsec_AAAA]}]", nil, "integrations[0] (a).account"},
		{"replicas", "nats: {stream: {replicas: 7}}", nil, "nats.stream.replicas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), env(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestExampleConfigLoads(t *testing.T) {
	file, err := os.ReadFile("../../examples/intake.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(file) != string(examples.Config) {
		t.Fatal("embedded example differs from examples/intake.yaml")
	}
	cfg, err := Parse(file, env(nil))
	if err != nil {
		t.Fatalf("examples/intake.yaml: %v", err)
	}
	if len(cfg.Integrations) == 0 || len(cfg.API.Tokens) == 0 {
		t.Fatal("example has no integrations or tokens")
	}
}
