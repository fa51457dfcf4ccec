package testenv

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// Main runs the package's tests, then stops the shared Postgres cluster (see
// Postgres) and removes the binaries GoBuild built, then checks that no goroutine outlived the tests. It exits the
// process with the tests' status. Call it from TestMain.
//
// No goroutine is ignored: nats-server, nats.go and pgx all stop their
// goroutines on Shutdown/Close, so a leftover one is a missing Close.
func Main(m *testing.M) {
	goleak.VerifyTestMain(runThenStop{m})
}

// mainRunning tells Postgres that Main will stop the shared cluster and
// remove its directory after the tests; without Main the directory would leak.
var mainRunning atomic.Bool

// runThenStop stops the shared cluster between m.Run and goleak's check, as
// the cluster's waiter goroutine would otherwise be reported.
type runThenStop struct{ m *testing.M }

func (r runThenStop) Run() int {
	mainRunning.Store(true)
	code := r.m.Run()
	for _, err := range []error{stopShared(), removeBuilds()} {
		if err != nil {
			fmt.Fprintln(os.Stderr, "testenv:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}
