package config

import (
	"os"
	"slices"
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
		"INTAKE_PARTNER_SECRET": "partner-secret-of-our-own", "INTAKE_NATS_USER": "ingress",
		"INTAKE_NATS_PASSWORD": "nats-password-of-our-own"}))
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

// TestComposeRolesDialNATSAsTheirOwnUsers: the compose stack runs NATS on
// the shipped permissions (deploy/nats/intake.conf) and every Intake service
// dials as the user of its role, with a password from the environment.
func TestComposeRolesDialNATSAsTheirOwnUsers(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	nats := f.Services["nats"]
	if !slices.Contains(nats.Command, "/etc/nats/intake.conf") ||
		!slices.Contains(nats.Volumes, "./deploy/nats/intake.conf:/etc/nats/intake.conf:ro") {
		t.Errorf("the nats service does not run deploy/nats/intake.conf: command %v, volumes %v", nats.Command, nats.Volumes)
	}
	conf, err := os.ReadFile("../../deploy/nats/intake.conf")
	if err != nil {
		t.Fatal(err)
	}
	for service, user := range map[string]string{"migrate": "admin", "ingress": "ingress", "processor": "processor", "replayer": "replayer"} {
		env := f.Services[service].Environment
		if env["INTAKE_NATS_USER"] != user {
			t.Errorf("service %s dials NATS as %q, want %q", service, env["INTAKE_NATS_USER"], user)
		}
		pw := "INTAKE_NATS_" + strings.ToUpper(user) + "_PASSWORD"
		if !strings.HasPrefix(env["INTAKE_NATS_PASSWORD"], "${"+pw+":?") {
			t.Errorf("service %s takes its NATS password from %q, want ${%s:?…}", service, env["INTAKE_NATS_PASSWORD"], pw)
		}
		if !strings.HasPrefix(nats.Environment[pw], "${"+pw+":?") {
			t.Errorf("the nats service does not get %s from the environment", pw)
		}
		if !strings.Contains(string(conf), "user: "+user+", password: $"+pw) {
			t.Errorf("deploy/nats/intake.conf has no user %s with password $%s", user, pw)
		}
	}
}
