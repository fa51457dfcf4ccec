package testenv

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// Eventually polls cond every 20ms until it returns true, and fails the test
// with the message (a format string and its arguments, or values to print)
// if it has not within timeout. Wait on conditions this way instead of
// sleeping for a guessed duration. Call it from the test's goroutine.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %s", timeout, message(msgAndArgs))
		}
		<-tick.C
	}
}

func message(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return "(no message)"
	}
	if format, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(format, msgAndArgs[1:]...)
	}
	return fmt.Sprint(msgAndArgs...)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. Another
// process may take it before it is used, so callers that bind it retry with a
// new one on "address in use".
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: pick a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
