package validate

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestShippedPostgresIsTheTestedMajor: every Postgres image the project
// ships or names (the CloudNativePG Cluster, the compose default, the
// compose smoke test's stand-in) is of the major the test suite runs on —
// the server binaries on this machine's PATH, the ones `make test` starts.
// Issue 36: the CloudNativePG manifest named 17 while every test and
// migration ran on 15. Moving to another major is a change of the machines
// the tests run on first (docs/production.md "Postgres versions").
func TestShippedPostgresIsTheTestedMajor(t *testing.T) {
	tested := testedPostgresMajor(t)
	shipped := map[string]*regexp.Regexp{
		filepath.Join(enginesDir, "postgres-cluster.yaml"): regexp.MustCompile(`imageName:\s*\S*/postgresql:(\d+)`),
		"../../docker-compose.yml":                         regexp.MustCompile(`INTAKE_POSTGRES_IMAGE:-postgres:(\d+)`),
		"../images/postgres/Dockerfile":                    regexp.MustCompile(`ARG PG_MAJOR=(\d+)`),
	}
	for path, re := range shipped {
		m := re.FindAllStringSubmatch(readFile(t, path), -1)
		if len(m) == 0 {
			t.Errorf("%s: no Postgres image found (pattern %s)", path, re)
			continue
		}
		for _, g := range m {
			if g[1] != tested {
				t.Errorf("%s names Postgres %s; the tests run on %s (ship the tested major)", path, g[1], tested)
			}
		}
	}
}

// testedPostgresMajor is the major of the postgres server the tests start:
// the one on PATH, else Debian's newest under /usr/lib/postgresql (as the
// Makefile finds it).
func testedPostgresMajor(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("postgres")
	if err != nil {
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
		if len(found) == 0 {
			if os.Getenv("CI") != "" {
				t.Fatal("no postgres server binary on PATH or in /usr/lib/postgresql: CI installs one")
			}
			t.Skip("no postgres server binary here: the tested major is unknown")
		}
		bin = found[len(found)-1]
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	// "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
	m := regexp.MustCompile(`\(PostgreSQL\) (\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("%s --version: cannot read the major from %q", bin, strings.TrimSpace(string(out)))
	}
	return m[1]
}
