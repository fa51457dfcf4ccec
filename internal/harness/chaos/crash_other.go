//go:build !unix

package chaos

import (
	"context"
	"os"
)

// CrashSignal is nil where there is no SIGUSR1: the crash switch is off.
var CrashSignal os.Signal

// CrashAfterCommitOnSignal is a no-op hook where there is no SIGUSR1.
func CrashAfterCommitOnSignal(context.Context) func() error {
	return func() error { return nil }
}
