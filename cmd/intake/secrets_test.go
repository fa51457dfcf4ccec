package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/intakehq/intake/internal/harness/testenv"
)

// TestRolesRefusePublishedSecrets: every production role started with the
// example config (whose defaults are published in the repository) exits
// before it connects to anything, naming each key of the secrets it loads:
// ingress the integrations', the replayer the API token's. The processor and
// migrate load neither (config.LoadFor), so none of them stops them. `intake
// dev` runs the same file: TestDevQuickstart starts it with the built-in
// example and calls the API with the example's token.
func TestRolesRefusePublishedSecrets(t *testing.T) {
	// The example's variables unset: their published defaults apply.
	for _, m := range regexp.MustCompile(`\$\{([A-Z_]+):-`).FindAllStringSubmatch(mustRead(t, "../../pkg/config/example.yaml"), -1) {
		t.Setenv(m[1], "")
		os.Unsetenv(m[1])
	}
	const (
		token   = "api.tokens[0] (ops).token: is a value published in the Intake repository (pkg/config/example.yaml); set your own"
		demo    = "integrations[0] (demo).secrets[0]: is a value published in the Intake repository (pkg/config/example.yaml); set your own"
		partner = "integrations[1] (partner).secrets[0]"
	)
	for _, c := range []struct {
		role      string
		want, not []string
	}{
		{"ingress", []string{demo, partner}, []string{token}},
		{"replayer", []string{token}, []string{demo, partner}},
		{"processor", nil, []string{token, demo, partner}},
		{"migrate", nil, []string{token, demo, partner}},
	} {
		t.Run(c.role, func(t *testing.T) {
			out := &testenv.Buffer{}
			args := []string{c.role, "--config", "../../pkg/config/example.yaml"}
			if c.role != "migrate" {
				args = append(args, "--http-addr", "127.0.0.1:0")
			}
			err := runCLI(t, context.Background(), out, args...)
			if err == nil {
				t.Fatalf("intake %s started without NATS", c.role)
			}
			msg := err.Error()
			for _, want := range c.want {
				if !strings.Contains(msg, want) {
					t.Errorf("intake %s: error does not name %q:\n%s", c.role, want, msg)
				}
			}
			for _, not := range c.not {
				if strings.Contains(msg, not) {
					t.Errorf("intake %s: error names %q, a secret it should not load:\n%s", c.role, not, msg)
				}
			}
			if strings.Contains(msg, "change-me") {
				t.Errorf("intake %s: error shows a secret:\n%s", c.role, msg)
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMigrateErrorHidesThePassword: `intake migrate` that cannot reach the
// database names it without the password of DATABASE_URL.
func TestMigrateErrorHidesThePassword(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there
	path := filepath.Join(t.TempDir(), "intake.yaml")
	if err := os.WriteFile(path, []byte(`
integrations:
  - {name: demo, provider: standard, tenant: acme, secrets: ["whsec_b3duLXNlY3JldC1vZi10aGlzLXRlc3Q="]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DATABASE_URL", "postgres://svc:PASSWORD-s3cret@"+addr+"/intake?sslmode=disable&connect_timeout=5")
	out := &testenv.Buffer{}
	err = runCLI(t, context.Background(), out, "migrate", "--config", path, "--no-streams", "--log-level", "debug")
	if err == nil {
		t.Fatal("migrate against a closed port succeeded")
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(out.String(), "s3cret") {
		t.Fatalf("the password leaked: %v\n%s", err, out.String())
	}
	if !strings.Contains(err.Error(), "svc@"+addr) {
		t.Fatalf("the error does not name the database: %v", err)
	}
}
