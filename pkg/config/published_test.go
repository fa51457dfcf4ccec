package config

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestExampleSecretsArePublished(t *testing.T) {
	cfg, err := Parse(Example, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.CheckNoPublishedSecrets()
	if err == nil {
		t.Fatal("the example's own secrets passed the check")
	}
	msg := err.Error()
	want := []string{
		"api.tokens[0] (ops).token: is a value published in the Intake repository (pkg/config/example.yaml); set your own",
		"integrations[0] (demo).secrets[0]: is a value published in the Intake repository (pkg/config/example.yaml); set your own",
	}
	for i, in := range cfg.Integrations {
		want = append(want, "integrations["+strconv.Itoa(i)+"] ("+in.Name+").secrets[0]")
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error does not name %q:\n%s", w, msg)
		}
	}
	if strings.Contains(msg, "change-me") || strings.Contains(msg, "whsec_") {
		t.Errorf("error shows a secret value:\n%s", msg)
	}
}

func TestOwnSecretsPass(t *testing.T) {
	own := map[string]string{"INTAKE_OPERATOR_TOKEN": "an-operator-token-of-our-own",
		"INTAKE_ENVELOPE_KEY": "an-envelope-key-of-our-own-0123456789abcdef"}
	for _, v := range []string{"DEMO", "PARTNER", "SVIX", "STRIPE_WHSEC", "GITHUB", "SHOPIFY", "SLACK_SIGNING"} {
		name := "INTAKE_" + v
		if !strings.HasSuffix(v, "WHSEC") {
			name += "_SECRET"
		}
		own[name] = "whsec_b3duLXNlY3JldC1vZi1vdXItb3du"
	}
	cfg, err := Parse(Example, env(own))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckNoPublishedSecrets(); err != nil {
		t.Fatalf("own secrets refused: %v", err)
	}

	// The digest of a published token is refused too.
	sum := sha256.Sum256([]byte("dev-operator-token-change-me"))
	cfg.API.Tokens[0] = Token{Name: "ops", TokenSHA256: hex.EncodeToString(sum[:]), Role: RoleOperator}
	err = cfg.CheckNoPublishedSecrets()
	if err == nil || !strings.Contains(err.Error(), "api.tokens[0] (ops).token_sha256: is a value published") {
		t.Fatalf("digest of a published token: %v", err)
	}
	cfg.API.Tokens = nil

	// A published value as a URL password is refused too.
	cfg.Postgres.URL = "postgres://intake:dev-operator-token-change-me@db/intake"
	err = cfg.CheckNoPublishedSecrets()
	if err == nil || !strings.Contains(err.Error(), "postgres.url (or DATABASE_URL) password") {
		t.Fatalf("published URL password: %v", err)
	}
}

func TestPublishedDefaults(t *testing.T) {
	p := PublishedDefaults([]byte(`a: "${A:-one}"
b: ["${B}", "${C:-}", "x ${D:-two} y"]`), "f.yaml")
	if len(p) != 2 || p["one"] != "f.yaml" || p["two"] != "f.yaml" {
		t.Fatalf("PublishedDefaults = %v", p)
	}
}

// TestRepositoryYAMLPublishesOnlyKnownSecrets walks every YAML file of the
// repository: each secret it supplies — a default of a ${VAR:-default} (or
// compose's ${VAR-default}) for a secret-like variable or key, a literal
// under a secret key, a literal URL password — must be a value the check
// knows (it knows only the embedded example's defaults). A new file or
// default that ships a secret fails here until it is taken from the
// environment without a default.
func TestRepositoryYAMLPublishesOnlyKnownSecrets(t *testing.T) {
	published := PublishedDefaults(Example, ExamplePath)
	root := filepath.Join("..", "..")
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		// A Helm chart's templates are Go templates, YAML only once rendered:
		// deploy/validate renders them (and the chart refuses secrets in values).
		if _, err := os.Stat(filepath.Join(filepath.Dir(path), "Chart.yaml")); d.IsDir() && d.Name() == "templates" && err == nil {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		for _, s := range shippedSecrets(&doc, false) {
			found++
			if _, ok := published[s.value]; !ok {
				t.Errorf("%s:%d: ships a secret the published-secrets check does not know (take it from ${VAR} without a default, or add it to pkg/config/example.yaml)", rel, s.line)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < len(published) {
		t.Fatalf("found %d shipped secrets, fewer than the example's %d defaults: the walk misses some", found, len(published))
	}
}

type shipped struct {
	value string
	line  int
}

var (
	// secretKey is a YAML key or environment variable that holds a secret.
	secretKey = regexp.MustCompile(`(?i)(^token$|^secrets?$|password|passwd|secret|_token$|whsec|api_?key)`)
	// shellRef is ${VAR}, ${VAR:-def}, ${VAR-def}, ${VAR:?msg}, ${VAR?msg}
	// (compose accepts all; Intake's config the first two).
	shellRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)
	// natsVarRef is a NATS config variable as the NATS Helm chart writes it
	// (<< $NAME >>): the server takes it from its environment.
	natsVarRef = regexp.MustCompile(`^<< \$[A-Za-z_][A-Za-z0-9_]* >>$`)
	// urlPassword is the password of a URL with user information.
	urlPass = regexp.MustCompile(`://[^/:@\s]*:([^@\s]+)@`)
	// secretObjectKey names a Kubernetes Secret object (a volume's or the
	// NATS chart's tls secretName), not a secret value.
	secretObjectKey = regexp.MustCompile(`^secretName$`)
	// kubeletRef is $(NAME) in a container's env value: the kubelet puts in
	// the value of an env entry before it (a secretKeyRef, say).
	kubeletRef = regexp.MustCompile(`^\$\([A-Za-z_][A-Za-z0-9_]*\)$`)
)

// shippedSecrets lists the secret values n supplies by itself; underSecret
// says n is the value of a secret key.
func shippedSecrets(n *yaml.Node, underSecret bool) []shipped {
	var out []shipped
	switch n.Kind {
	case yaml.ScalarNode:
		v := n.Value
		refs := shellRef.FindAllStringSubmatchIndex(v, -1)
		for _, m := range refs {
			name, op := v[m[2]:m[3]], ""
			if m[4] >= 0 {
				op = v[m[4]:m[5]]
			}
			if (op == "-" || op == ":-") && m[6] < m[7] && (underSecret || secretKey.MatchString(name)) {
				out = append(out, shipped{v[m[6]:m[7]], n.Line})
			}
		}
		if underSecret && len(refs) == 0 && v != "" && !natsVarRef.MatchString(v) {
			out = append(out, shipped{v, n.Line})
		}
		if m := urlPass.FindStringSubmatch(v); m != nil && !strings.HasPrefix(m[1], "${") && !kubeletRef.MatchString(m[1]) {
			out = append(out, shipped{m[1], n.Line})
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			out = append(out, shippedSecrets(n.Content[i+1], secretKey.MatchString(k) && !secretObjectKey.MatchString(k))...)
		}
	default: // documents, sequences (a secret key's list stays secret), aliases
		for _, c := range n.Content {
			out = append(out, shippedSecrets(c, underSecret)...)
		}
	}
	return out
}

// TestPublishedKeyWithoutItsPrefix: a Standard Webhooks key is the same key
// with or without whsec_, so the published one is refused either way.
func TestPublishedKeyWithoutItsPrefix(t *testing.T) {
	raw := []byte(`
integrations:
  - {name: demo, provider: standard, tenant: acme, secrets: ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
`)
	cfg, err := Parse(raw, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckNoPublishedSecrets(); err == nil ||
		!strings.Contains(err.Error(), "integrations[0] (demo).secrets[0]") {
		t.Fatalf("the published key without its prefix passed: %v", err)
	}
}
