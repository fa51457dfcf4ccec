package config

import (
	"strings"
	"testing"
	"time"
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
	if got := cfg.NATS.Stream.DuplicateWindow; got != 2*time.Minute {
		t.Errorf("duplicate_window default = %v", got)
	}
	if got := cfg.Integrations[0].MaxBodyBytes; got != 1<<20 {
		t.Errorf("max_body_bytes default = %d", got)
	}
	if got := cfg.Integrations[0].Tolerance; got != 5*time.Minute {
		t.Errorf("tolerance default = %v", got)
	}
	if got := cfg.Outbox.RelayAfter; got != 5*time.Second {
		t.Errorf("relay_after default = %v", got)
	}
	short, err := Parse([]byte(minimal+"nats: {stream: {duplicate_window: 2s}}\n"), env(map[string]string{"SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := short.Outbox.RelayAfter; got != time.Second {
		t.Errorf("relay_after default under a 2s duplicate window = %v, want half of it", got)
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
    event_id: {field: id}
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
		{"relay after the window", "nats: {stream: {duplicate_window: 1m}}\noutbox: {relay_after: 31s}", nil, "outbox.relay_after"},
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
	cfg, err := Parse(Example, env(nil))
	if err != nil {
		t.Fatalf("%s: %v", ExamplePath, err)
	}
	if len(cfg.Integrations) == 0 || len(cfg.API.Tokens) == 0 {
		t.Fatal("example has no integrations or tokens")
	}
}

func TestProviderIntegrations(t *testing.T) {
	cfg, err := Parse([]byte(`
integrations:
  - name: stripe-live
    provider: stripe
    tenant: acme
    secrets: ["${STRIPE_WHSEC}", "${STRIPE_WHSEC_OLD:-}"]
    rate_limit: {per_second: 2.5}
  - name: shop
    provider: shopify
    tenant: acme
    secrets: ["shpss_x"]
    allowed_shops: [acme.myshopify.com]
    object_version: {field: updated_at}
  - name: gh
    provider: github
    tenant: acme
    secrets: ["gh-secret"]
    object_id: {field: repository.id}
    rate_limit: {per_second: 10, burst: 50}
  - name: partner
    provider: hmac
    tenant: acme
    secrets: ["p"]
    hmac: {header: X-Sig, timestamp_header: X-Ts, template: "{timestamp}.{body}"}
    event_id: {field: id}
`), env(map[string]string{"STRIPE_WHSEC": "whsec_live", "STRIPE_WHSEC_OLD": "whsec_old"}))
	if err != nil {
		t.Fatal(err)
	}
	in := cfg.Integrations
	if in[0].RateLimit != (RateLimit{PerSecond: 2.5, Burst: 3}) {
		t.Errorf("stripe rate_limit = %+v, want burst defaulted to 3", in[0].RateLimit)
	}
	if in[1].AllowedShops[0] != "acme.myshopify.com" || in[1].ObjectVersion.Field != "updated_at" {
		t.Errorf("shopify options = %+v", in[1].Config)
	}
	if in[2].ObjectID.Field != "repository.id" || in[2].RateLimit.Burst != 50 {
		t.Errorf("github options = %+v %+v", in[2].Config, in[2].RateLimit)
	}
	if in[3].HMAC.TimestampHeader != "X-Ts" || in[3].HMAC.Template != "{timestamp}.{body}" {
		t.Errorf("hmac options = %+v", in[3].HMAC)
	}
	if (in[1].RateLimit != RateLimit{}) {
		t.Errorf("no rate_limit: %+v, want none", in[1].RateLimit)
	}
}

func TestProviderIntegrationErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"negative rate", "integrations: [{name: a, provider: github, tenant: t, secrets: [s], rate_limit: {per_second: -1}}]",
			"integrations[0] (a).rate_limit.per_second"},
		{"infinite rate", "integrations: [{name: a, provider: github, tenant: t, secrets: [s], rate_limit: {per_second: .inf}}]",
			"integrations[0] (a).rate_limit.per_second"},
		{"burst without rate", "integrations: [{name: a, provider: github, tenant: t, secrets: [s], rate_limit: {burst: 5}}]",
			"integrations[0] (a).rate_limit.burst"},
		{"unknown rate_limit key", "integrations: [{name: a, provider: github, tenant: t, secrets: [s], rate_limit: {rps: 5}}]",
			"field rps not found"},
		{"bad shop", "integrations: [{name: a, provider: shopify, tenant: t, secrets: [s], allowed_shops: ['https://x']}]",
			"integrations[0] (a).allowed_shops[0]"},
		{"shops on stripe", "integrations: [{name: a, provider: stripe, tenant: t, secrets: [s], allowed_shops: [x.myshopify.com]}]",
			"integrations[0] (a).allowed_shops"},
		{"whsk_ secret", "integrations: [{name: a, provider: standard, tenant: t, secrets: [whsk_AAAA]}]",
			"integrations[0] (a).secrets[0]"},
		{"object_id path", "integrations: [{name: a, provider: stripe, tenant: t, secrets: [s], object_id: {field: 'a.*'}}]",
			"integrations[0] (a).object_id.field"},
		{"hmac template typo", "integrations: [{name: a, provider: hmac, tenant: t, secrets: [s], event_id: {field: id}, hmac: {header: X, template: '{bdy}'}}]",
			"integrations[0] (a).hmac.template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), env(nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestTypeErrorsDoNotEchoValues(t *testing.T) {
	const secret = "hunter2-very-secret"
	raw := "postgres:\n  max_conns: " + secret + "\napi:\n  tokens: " + secret + "\n"
	_, err := Parse([]byte(raw), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("a string where a number and a list belong was accepted")
	}
	if strings.Contains(err.Error(), "hunter") {
		t.Fatalf("the error echoes the value: %v", err)
	}
	if !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "int32") {
		t.Fatalf("the error no longer says where and what: %v", err)
	}
}
