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

const module = "github.com/intakehq/intake"

// harness is code that exists for tests, benchmarks and a laptop: the chaos
// and bench harnesses, the test environment, the private Postgres cluster
// and `intake dev`. A production role that imported it would ship fault
// injection or start local infrastructure.
var harness = []string{
	module + "/internal/bench",
	module + "/internal/chaos",
	module + "/internal/dev",
	module + "/internal/pgcluster",
	module + "/internal/testenv",
}

// roles are the packages a production role (intake ingress, processor,
// replayer, migrate) or a program embedding Intake is built from.
var roles = []string{"./pkg/...", "./ingress", "./processor", "./replayer"}

// harnessFiles are the files of cmd/intake allowed to import harness code:
// the `dev` and `bench` subcommands.
var harnessFiles = []string{"banner.go", "bench.go", "benchperf.go", "chaos.go", "dev.go"}

func isHarness(path string) bool {
	for _, h := range harness {
		if path == h || strings.HasPrefix(path, h+"/") {
			return true
		}
	}
	return false
}

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
	return strings.Fields(string(out))
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPublicPackagesAreNotHarness(t *testing.T) {
	for _, p := range goList(t, "./pkg/...") {
		if isHarness(p) || strings.Contains(p, "/internal/") {
			t.Errorf("%s is under pkg/ (public API) but is harness or internal code", p)
		}
	}
}

// TestRolesDoNotImportHarness fails when a production role's import graph
// reaches harness code, naming the path that brings it in.
func TestRolesDoNotImportHarness(t *testing.T) {
	for _, pkg := range goList(t, append([]string{"-f", "{{.ImportPath}}"}, roles...)...) {
		if isHarness(pkg) {
			t.Errorf("%s is a harness package among the roles' packages", pkg)
			continue
		}
		for _, line := range goList(t, "-deps", "-f", `{{.ImportPath}}`, pkg) {
			if isHarness(line) {
				t.Errorf("%s imports harness package %s (directly or through a dependency)", pkg, line)
			}
		}
	}
}

// TestRoleCommandsDoNotImportHarness: in cmd/intake, only the dev and bench
// subcommands' files import harness code; the role commands (ingress,
// processor, replayer, migrate) and the operator CLI do not.
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
			if isHarness(p) {
				t.Errorf("cmd/intake/%s imports harness package %s; only %v may", name, p, harnessFiles)
			}
		}
	}
}
