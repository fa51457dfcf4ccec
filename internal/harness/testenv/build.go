package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// builds are the binaries this test binary built, by package: each is
// built once (sync.Once) into one temp dir that Main removes after the
// tests. Package state for the same reason as shared.
var builds struct {
	mu    sync.Mutex
	dir   string
	byPkg map[string]*build
}

type build struct {
	once sync.Once
	bin  string
	err  error
}

// GoBuild builds the main package pkg (an import path) once per test
// binary and returns the executable's path; every test that asks for it
// shares the one build. The build uses the go command on PATH (else
// GOROOT's) with the environment of the test.
func GoBuild(t testing.TB, pkg string) string {
	t.Helper()
	if !mainRunning.Load() {
		t.Fatal("testenv.GoBuild needs the package's TestMain to call testenv.Main, which removes the build: " +
			"add func TestMain(m *testing.M) { testenv.Main(m) }")
	}
	builds.mu.Lock()
	if builds.byPkg == nil {
		builds.byPkg = map[string]*build{}
	}
	b, ok := builds.byPkg[pkg]
	if !ok {
		b = &build{}
		builds.byPkg[pkg] = b
	}
	builds.mu.Unlock()

	b.once.Do(func() { b.bin, b.err = goBuild(pkg) })
	if b.err != nil {
		t.Fatalf("testenv: %v", b.err)
	}
	return b.bin
}

func goBuild(pkg string) (string, error) {
	builds.mu.Lock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "intake-testbin-")
		if err != nil {
			builds.mu.Unlock()
			return "", err
		}
		// Child processes may run as another user (postgres); they only
		// need to execute the binary.
		if err := os.Chmod(dir, 0o755); err != nil {
			builds.mu.Unlock()
			return "", err
		}
		builds.dir = dir
	}
	dir := builds.dir
	builds.mu.Unlock()

	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, path.Base(pkg)+"-"+randomHex(4))
	cmd := exec.Command(goBin, "build", "-o", bin, pkg)
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// removeBuilds removes what GoBuild built; Main calls it after the tests.
func removeBuilds() error {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir == "" {
		return nil
	}
	err := os.RemoveAll(builds.dir)
	builds.dir, builds.byPkg = "", nil
	return err
}
