package layout

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// harnessFiles are the files of cmd/intake allowed to import harness code:
// the `dev`, `nats` and `bench` subcommands.
var harnessFiles = []string{"banner.go", "bench.go", "benchperf.go", "chaos.go", "dev.go", "nats.go"}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root(t)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// importGraph is every package of the module with its direct imports,
// tests left out: the graph a build links.
func importGraph(t *testing.T) map[string][]string {
	g := map[string][]string{}
	for _, line := range goList(t, "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...") {
		f := strings.Fields(line)
		g[f[0]] = f[1:]
	}
	return g
}

// TestImportsPointDown checks the module's real import graph.
func TestImportsPointDown(t *testing.T) {
	g := importGraph(t)
	if _, ok := g[Module]; !ok || len(g) < 20 {
		t.Fatalf("go list found %d packages, without the root package: the test is not looking at the module", len(g))
	}
	for _, msg := range Check(g) {
		t.Error(msg)
	}
}

// TestCheckFindsBackArrows shows Check failing on the arrows it exists to
// refuse, each added to the real graph.
func TestCheckFindsBackArrows(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{"pkg/store", "processor", "pkg/store (pkg) imports processor (service): the arrow points up"},
		{"pkg/config", "", "pkg/config (pkg) imports intake (root) (root): the arrow points up"},
		{"internal/backoff", "pkg/envelope", "internal/backoff (internal helper) imports pkg/envelope (pkg): the arrow points up"},
		{"processor", "replayer", "processor (service) imports replayer (service): a service does not import another service"},
		{"replayer/console", "", "replayer/console (service) imports intake (root) (root): the arrow points up"},
		{"ingress", "internal/harness/testenv", "ingress (service) imports internal/harness/testenv (harness): harness code is imported by the harness only"},
		{"pkg/newlib", "internal/harness/natsserver", "pkg/newlib (pkg) imports internal/harness/natsserver (harness): harness code"},
		{"", "internal/harness/bench", "intake (root) (root) imports internal/harness/bench (harness): harness code"},
		{"processor", "examples/support-cases", "processor (service) imports examples/support-cases (program): a program is imported by nothing"},
	} {
		g := importGraph(t)
		from, to := path(tc.from), path(tc.to)
		g[from] = append(g[from], to)
		got := Check(g)
		if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
			t.Errorf("%s → %s: Check = %q, want one line starting %q", tc.from, tc.to, got, tc.want)
		}
	}
}

func path(rel string) string {
	if rel == "" {
		return Module
	}
	return Module + "/" + rel
}

func TestLayerOf(t *testing.T) {
	for rel, want := range map[string]Layer{
		"": Root, "cmd/intake": Program, "examples/subscriber": Program, "deploy/images/postgres/entrypoint": Program,
		"ingress": Service, "replayer/console": Service, "pkg/store": Library, "pkg/telemetry/otlp": Library,
		"internal/backoff": Helper, "internal/harness": Harness, "internal/harness/checks/layout": Harness,
		"internal/harnessing": Helper,
	} {
		if got := LayerOf(path(rel)); got != want {
			t.Errorf("LayerOf(%q) = %s, want %s", rel, got, want)
		}
	}
	for _, p := range []string{"github.com/intakehq/intakex", "github.com/nats-io/nats.go", "fmt"} {
		if got := LayerOf(p); got != Outside {
			t.Errorf("LayerOf(%q) = %s, want outside", p, got)
		}
	}
}

// TestProductLinksNoHarnessDependencies: what the roles are built from links
// no nats-server (the embedded server is harness), and the subscriber
// library links neither pgx nor the OTLP exporter (a service in another
// team's repository imports it); pgx is in pkg/subscriber/subscribertx only.
func TestProductLinksNoHarnessDependencies(t *testing.T) {
	for _, tc := range []struct {
		pkgs      []string
		forbidden []string
	}{
		{[]string{".", "./ingress", "./processor", "./replayer/...", "./pkg/..."}, []string{"github.com/nats-io/nats-server/"}},
		{[]string{"./pkg/subscriber"}, []string{"github.com/jackc/pgx/", "google.golang.org/grpc", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters/"}},
		// ConsumeTx's package links pgx, as its users want, and nothing else heavy.
		{[]string{"./pkg/subscriber/subscribertx"}, []string{"google.golang.org/grpc", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters/"}},
	} {
		for _, pkg := range goList(t, append([]string{"-f", "{{.ImportPath}}"}, tc.pkgs...)...) {
			for _, dep := range goList(t, "-deps", "-f", "{{.ImportPath}}", pkg) {
				for _, f := range tc.forbidden {
					if strings.HasPrefix(dep, f) {
						t.Errorf("%s links %s", pkg, dep)
					}
				}
			}
		}
	}
}

// TestRoleCommandsDoNotImportHarness: in cmd/intake, only the dev, nats and
// bench subcommands' files import harness code; the role commands
// (ingress, processor, replayer, migrate) and the operator CLI do not.
func TestRoleCommandsDoNotImportHarness(t *testing.T) {
	dir := filepath.Join(root(t), "cmd", "intake")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasSuffix(name, "_test.go") || slices.Contains(harnessFiles, name) {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if LayerOf(p) == Harness {
				t.Errorf("cmd/intake/%s imports harness package %s; only %v may", name, p, harnessFiles)
			}
		}
	}
}
