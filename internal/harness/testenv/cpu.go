package testenv

import (
	"syscall"
	"testing"
	"time"
)

// CPUTime is the user and system CPU this process has used: benchmarks
// report it per operation, as it moves less with a shared host than
// wall-clock time does.
func CPUTime(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("testenv: getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
