package config

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestComposeConfigHasNoDefaults: deploy/compose/intake.yaml takes every
// secret from the environment; unset, loading fails instead of running with
// a default.
func TestComposeConfigHasNoDefaults(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/compose/intake.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(raw, env(nil)); err == nil || !strings.Contains(err.Error(), "is not set") {
		t.Fatalf("compose config loaded without its secrets: %v", err)
	}
	cfg, err := Parse(raw, env(map[string]string{
		"INTAKE_OPERATOR_TOKEN": "0123456789abcdef0123", "INTAKE_DEMO_SECRET": "whsec_b3duLXNlY3JldC1vZi1vdXItb3du",
		"INTAKE_PARTNER_SECRET": "partner-secret-of-our-own"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckNoPublishedSecrets(examplePublished()); err != nil {
		t.Fatal(err)
	}
}

// TestComposePublishesInfrastructureOnLoopback: NATS and Postgres (and the
// processor's metrics, the operator API) are reachable from the host only.
func TestComposePublishesInfrastructureOnLoopback(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Ports []string `yaml:"ports"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"nats", "postgres", "processor", "replayer"} {
		s, ok := f.Services[name]
		if !ok || len(s.Ports) == 0 {
			t.Errorf("service %s: no ports", name)
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s publishes %q beyond loopback", name, p)
			}
		}
	}
}
