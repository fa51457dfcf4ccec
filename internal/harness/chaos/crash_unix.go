//go:build unix

package chaos

import (
	"context"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// CrashSignal is what the harness sends its processors (`intake bench
// chaos-processor`) to make one die between a commit and its acks.
var CrashSignal os.Signal = syscall.SIGUSR1

// CrashAfterCommitOnSignal returns a faults.Hooks.AfterCommit hook for
// fault injection: after CrashSignal arrives, the next batch that commits
// kills its own process with SIGKILL before any of the batch's acks is sent
// — the narrowest window of "the processor dies between commit and ack",
// which a kill from outside at a random moment rarely hits. The signal
// handler is removed when ctx ends.
func CrashAfterCommitOnSignal(ctx context.Context) func() error {
	var armed atomic.Bool
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, CrashSignal)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				armed.Store(true)
			}
		}
	}()
	return func() error {
		if !armed.Load() {
			return nil
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never ack: SIGKILL is on its way
	}
}
