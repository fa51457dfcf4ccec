package config

import (
	"os"
	"regexp"
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
		"INTAKE_ENVELOPE_KEY":  "an-envelope-key-of-our-own-0123456789abcdef",
		"INTAKE_NATS_PASSWORD": "nats-password-of-our-own"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckNoPublishedSecrets(); err != nil {
		t.Fatal(err)
	}
}

// TestComposePublishesInfrastructureOnLoopback: NATS and Postgres (and the
// processor's and the dispatcher's metrics, the operator API) are reachable
// from the host only.
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
	for _, name := range []string{"nats", "postgres", "processor", "replayer", "dispatcher"} {
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
	for service, user := range map[string]string{"migrate": "admin", "ingress": "ingress", "processor": "processor", "replayer": "replayer", "dispatcher": "dispatcher"} {
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

// composeFile is the part of docker-compose.yml the shape tests read.
type composeFile struct {
	Services map[string]struct {
		Image       string   `yaml:"image"`
		Ports       []string `yaml:"ports"`
		Restart     string   `yaml:"restart"`
		NetworkMode string   `yaml:"network_mode"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		DependsOn map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
	} `yaml:"services"`
}

func readCompose(t *testing.T, path string) composeFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

var intakeRoles = []string{"ingress", "processor", "replayer", "dispatcher"}

// TestComposeStartsInOrderAndHeals: every long-running service has a
// healthcheck (the Intake roles' runs `intake healthcheck`: the image has no
// shell) and restarts by itself; migrate runs once both engines are healthy,
// and the roles start only after it exited 0 — ingress refuses to start
// without NATS and the streams.
func TestComposeStartsInOrderAndHeals(t *testing.T) {
	f := readCompose(t, "../../docker-compose.yml")
	for _, name := range append([]string{"nats", "postgres"}, intakeRoles...) {
		s := f.Services[name]
		if len(s.Healthcheck.Test) < 2 || s.Healthcheck.Test[0] != "CMD" {
			t.Errorf("service %s: healthcheck %v, want an exec-form [CMD, …] test", name, s.Healthcheck.Test)
		}
		if s.Restart != "unless-stopped" {
			t.Errorf("service %s: restart %q, want unless-stopped", name, s.Restart)
		}
	}
	for _, name := range intakeRoles {
		if test := f.Services[name].Healthcheck.Test; !slices.Contains(test, "healthcheck") {
			t.Errorf("service %s: healthcheck %v does not run `intake healthcheck`", name, test)
		}
	}
	want := map[string]map[string]string{
		"migrate":    {"nats": "service_healthy", "postgres": "service_healthy"},
		"ingress":    {"nats": "service_healthy", "migrate": "service_completed_successfully"},
		"processor":  {"nats": "service_healthy", "postgres": "service_healthy", "migrate": "service_completed_successfully"},
		"replayer":   {"nats": "service_healthy", "postgres": "service_healthy", "migrate": "service_completed_successfully"},
		"dispatcher": {"nats": "service_healthy", "postgres": "service_healthy", "migrate": "service_completed_successfully"},
	}
	for name, deps := range want {
		got := f.Services[name].DependsOn
		for dep, cond := range deps {
			if got[dep].Condition != cond {
				t.Errorf("service %s: depends on %s with %q, want %q", name, dep, got[dep].Condition, cond)
			}
		}
	}
	if r := f.Services["migrate"].Restart; r != "no" {
		t.Errorf("migrate: restart %q, want \"no\" (the roles wait for it to exit 0)", r)
	}
}

// TestComposeImagesAreOneAndReplaceable: every Intake service runs the same
// image, and each image is a variable with the upstream default, so the
// smoke test can run stand-ins where no registry is reachable.
func TestComposeImagesAreOneAndReplaceable(t *testing.T) {
	f := readCompose(t, "../../docker-compose.yml")
	for _, name := range append([]string{"migrate"}, intakeRoles...) {
		if img := f.Services[name].Image; img != "${INTAKE_IMAGE:-intake:local}" {
			t.Errorf("service %s: image %q, want ${INTAKE_IMAGE:-intake:local}", name, img)
		}
	}
	for name, want := range map[string]string{"nats": "${INTAKE_NATS_IMAGE:-nats:", "postgres": "${INTAKE_POSTGRES_IMAGE:-postgres:15"} {
		if img := f.Services[name].Image; !strings.HasPrefix(img, want) {
			t.Errorf("service %s: image %q, want %s…}", name, img, want)
		}
	}
	// ingress publishes only the webhook port beyond loopback.
	for _, p := range f.Services["ingress"].Ports {
		if p != "8080:8080" && !strings.HasPrefix(p, "127.0.0.1:") {
			t.Errorf("ingress publishes %q beyond loopback", p)
		}
	}
}

// TestComposeSmokeOverrideStaysOnLoopback: the smoke test's override runs
// every service in the host's network, so every address it sets must be
// loopback.
func TestComposeSmokeOverrideStaysOnLoopback(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/compose/smoke.override.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := readCompose(t, "../../deploy/compose/smoke.override.yaml")
	for _, name := range []string{"nats", "postgres", "migrate", "ingress", "processor", "replayer", "dispatcher"} {
		if f.Services[name].NetworkMode != "host" {
			t.Errorf("smoke override: service %s is not in the host's network", name)
		}
	}
	for _, addr := range regexp.MustCompile(`(?:://(?:[^@\n]*@)?|-a", "|listen_addresses=|--http-addr", "|ADDR: )([^:/"\s]*)`).FindAllStringSubmatch(string(raw), -1) {
		if addr[1] != "127.0.0.1" {
			t.Errorf("smoke override binds or dials %q, not 127.0.0.1", addr[0])
		}
	}
}

// TestPaymentsHandlerInComposeAndChart: the README's SQL handler
// (examples/payments/intake.yaml's handlers:), added as it stands to the
// compose file's config and to the Helm chart's values config, loads and
// validates: the stock image runs it with no other change (its table and
// function are the user's migration, applied before the processor starts).
func TestPaymentsHandlerInComposeAndChart(t *testing.T) {
	example, err := os.ReadFile("../../examples/payments/intake.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ex struct {
		Handlers yaml.Node `yaml:"handlers"`
	}
	if err := yaml.Unmarshal(example, &ex); err != nil || ex.Handlers.Kind != yaml.SequenceNode {
		t.Fatalf("examples/payments/intake.yaml has no handlers: list: %v", err)
	}
	withHandlers := func(t *testing.T, raw []byte) []byte {
		t.Helper()
		var doc map[string]any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		var hs []any
		if err := ex.Handlers.Decode(&hs); err != nil {
			t.Fatal(err)
		}
		doc["handlers"] = hs
		out, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	compose, err := os.ReadFile("../../deploy/compose/intake.yaml")
	if err != nil {
		t.Fatal(err)
	}
	values, err := os.ReadFile("../../deploy/helm/intake/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config map[string]any `yaml:"config"`
	}
	if err := yaml.Unmarshal(values, &v); err != nil {
		t.Fatal(err)
	}
	chart, err := yaml.Marshal(v.Config)
	if err != nil {
		t.Fatal(err)
	}
	vars := env(map[string]string{
		"INTAKE_OPERATOR_TOKEN": "0123456789abcdef0123", "INTAKE_DEMO_SECRET": "whsec_b3duLXNlY3JldC1vZi1vdXItb3du",
		"INTAKE_PARTNER_SECRET": "partner-secret-of-our-own", "INTAKE_NATS_USER": "processor",
		"INTAKE_ENVELOPE_KEY":  "an-envelope-key-of-our-own-0123456789abcdef",
		"INTAKE_NATS_PASSWORD": "nats-password-of-our-own"})
	for name, raw := range map[string][]byte{"compose": compose, "chart values": chart} {
		t.Run(name, func(t *testing.T) {
			cfg, err := Parse(withHandlers(t, raw), vars)
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if len(cfg.Handlers) != 1 || cfg.Handlers[0].Name != "payments" || cfg.Handlers[0].SQL != "SELECT apply_payment(:body, :key)" {
				t.Fatalf("handlers %+v, want the payments handler", cfg.Handlers)
			}
		})
	}
}

// TestComposeGivesEachRoleOnlyItsSecrets: every Intake service of the
// compose stack starts from its own environment alone (each variable its
// part of deploy/compose/intake.yaml references is set), and is given no
// secret its part does not reference: ingress no operator token and no
// database URL, the replayer no webhook secret (issue 30, item 6).
func TestComposeGivesEachRoleOnlyItsSecrets(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("../../deploy/compose/intake.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for service, want := range map[string]Secrets{"ingress": WebhookSecrets | EnvelopeKeys, "replayer": APITokens, "processor": EnvelopeKeys,
		"dispatcher": DestinationSecrets, "migrate": NoSecrets} {
		env := f.Services[service].Environment
		referenced := map[string]bool{}
		lookup := func(k string) (string, bool) {
			referenced[k] = true
			if _, ok := env[k]; !ok {
				return "", false
			}
			return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true // any secret a field accepts
		}
		if _, err := ParseFor(file, lookup, want); err != nil {
			t.Errorf("service %s does not start from its own environment: %v", service, err)
		}
		for k := range env {
			secret := strings.Contains(k, "SECRET") || strings.Contains(k, "TOKEN") || strings.Contains(k, "KEY")
			if secret && !referenced[k] {
				t.Errorf("service %s is given %s, a secret its part of the config does not use", service, k)
			}
		}
		if _, ok := env["DATABASE_URL"]; ok == (service == "ingress") {
			t.Errorf("service %s: DATABASE_URL given %v; only the roles that use Postgres get it", service, ok)
		}
	}
}
