package pgcluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/pgcluster"
	"github.com/intakehq/intake/internal/harness/testenv"
)

// TestPostgresDiesWithOwner kills (SIGKILL, no chance to clean up) a process
// that owns a cluster and expects postgres to shut itself down: a crashed
// `intake dev` or a test binary killed by -timeout must not leave servers
// running. The owner is this test binary, re-executed in helper mode.
func TestPostgresDiesWithOwner(t *testing.T) {
	if dir := os.Getenv("PGCLUSTER_TEST_OWNER_DIR"); dir != "" {
		ownerHelper(dir)
		return
	}
	t.Parallel()
	if _, err := exec.LookPath("initdb"); err != nil {
		t.Skip(pgcluster.ErrNoBinaries)
	}
	dir := tempDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestPostgresDiesWithOwner$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PGCLUSTER_TEST_OWNER_DIR="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // held open: the helper blocks reading it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if !strings.HasPrefix(line, "started") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper did not start a cluster: %q, %v", line, err)
	}
	pidFile := filepath.Join(dir, "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(first)
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() { // do not leave the orphan behind
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	})

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// A fast shutdown removes postmaster.pid as its last step.
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, err := os.Stat(pidFile)
		return errors.Is(err, os.ErrNotExist)
	}, "postgres still running after its owner was killed")
}

func ownerHelper(dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: true}); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("started")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until killed
	os.Exit(1)
}
