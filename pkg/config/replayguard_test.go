package config

import (
	"strings"
	"testing"

	"github.com/intakehq/intake/pkg/provider"
)

// TestReplayGuardDefaults: on where the id is unsigned and no signed
// timestamp bounds a replay, off where it is signed; replay_guard wins.
func TestReplayGuardDefaults(t *testing.T) {
	on, off := true, false
	for _, c := range []struct {
		name string
		in   Integration
		want bool
	}{
		{"github", Integration{Config: provider.Config{Provider: "github"}}, true},
		{"shopify", Integration{Config: provider.Config{Provider: "shopify"}}, true},
		{"hmac header id", Integration{Config: provider.Config{Provider: "hmac", EventID: provider.Field{Header: "X-Event-Id"}}}, true},
		{"hmac signed header id", Integration{Config: provider.Config{Provider: "hmac", EventID: provider.Field{Header: "X-Event-Id"},
			HMAC: provider.HMACConfig{Template: "{id}.{body}"}}}, false},
		{"hmac body id", Integration{Config: provider.Config{Provider: "hmac", EventID: provider.Field{Field: "id"}}}, false},
		{"standard", Integration{Config: provider.Config{Provider: "standard"}}, false},
		{"svix", Integration{Config: provider.Config{Provider: "svix"}}, false},
		{"stripe", Integration{Config: provider.Config{Provider: "stripe"}}, false},
		{"slack", Integration{Config: provider.Config{Provider: "slack"}}, false},
		{"token", Integration{Config: provider.Config{Provider: "token"}}, true},
		{"basic", Integration{Config: provider.Config{Provider: "basic"}}, true},
		{"gitlab-token preset", Integration{Config: provider.Config{Provider: "gitlab-token"}}, true},
		{"pairs body id", Integration{Config: provider.Config{Provider: "pairs", EventID: provider.Field{Field: "id"}}}, false},
		{"pairs header id", Integration{Config: provider.Config{Provider: "pairs", EventID: provider.Field{Header: "X-Id"}}}, true},
		{"pubkey header id", Integration{Config: provider.Config{Provider: "pubkey", EventID: provider.Field{Header: "X-Id"}}}, true},
		{"paddle preset (body id, signed time)", Integration{Config: provider.Config{Provider: "paddle"}}, false},
		{"vercel preset (body id)", Integration{Config: provider.Config{Provider: "vercel"}}, false},
		{"linear preset (Linear-Delivery)", Integration{Config: provider.Config{Provider: "linear"}}, true},
		{"linear preset, operator's body id", Integration{Config: provider.Config{Provider: "linear", EventID: provider.Field{Field: "data.id"}}}, false},
		{"github off", Integration{ReplayGuard: &off, Config: provider.Config{Provider: "github"}}, false},
		{"standard on", Integration{ReplayGuard: &on, Config: provider.Config{Provider: "standard"}}, true},
	} {
		if got := c.in.GuardsReplays(); got != c.want {
			t.Errorf("%s: GuardsReplays() = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestPresetConfigErrorNamesIntegration: a preset's error refuses the start
// and names the integration and the preset.
func TestPresetConfigErrorNamesIntegration(t *testing.T) {
	_, err := Parse([]byte(`
integrations:
  - {name: pad, provider: paddle, tenant: acme, secrets: [s], event_id: {header: X-Id}}
`), func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "integrations[0] (pad)") || !strings.Contains(err.Error(), "paddle") {
		t.Fatalf("err = %v, want it to name the integration and the preset", err)
	}
}

// TestReplayGuardParses: the key reads from YAML.
func TestReplayGuardParses(t *testing.T) {
	cfg, err := Parse([]byte(`
integrations:
  - {name: gh, provider: github, tenant: acme, secrets: [s], replay_guard: false}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if in, _ := cfg.Integration("gh"); in.GuardsReplays() {
		t.Fatal("replay_guard: false did not turn the guard off")
	}
}
