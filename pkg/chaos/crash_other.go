//go:build !unix

package chaos

import (
	"context"
	"os"

	"github.com/intakehq/intake/processor"
)

// CrashSignal is nil where there is no SIGUSR1: the crash switch is off.
var CrashSignal os.Signal

// CrashAfterCommitOnSignal is a no-op hook where there is no SIGUSR1.
func CrashAfterCommitOnSignal(context.Context) func([]*processor.Event) error {
	return func([]*processor.Event) error { return nil }
}
