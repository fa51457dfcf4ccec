package stream

import (
	"fmt"
	"strconv"
	"strings"
)

// MinServerVersion is the oldest nats-server Intake starts against. An
// independent analysis of NATS 2.12.1 (Jepsen, December 2025) found
// acknowledged JetStream writes lost after crashes and with peers removed;
// the fixes shipped in 2.10.23 (stream loss at crash time) and 2.12.3
// (peer removal). Intake answers 2xx only after a PubAck, so a server that
// may lose an acknowledged write breaks its promise: it refuses to run on
// one rather than find out from a customer.
const MinServerVersion = "2.12.3"

// CheckServerVersion returns an error naming both versions when v (as the
// server reports it, e.g. "2.15.2" or "2.12.3-beta.1") is older than
// MinServerVersion or cannot be read.
func CheckServerVersion(v string) error {
	got, ok := parseVersion(v)
	if !ok {
		return fmt.Errorf("nats-server version %q cannot be read; Intake needs %s or later", v, MinServerVersion)
	}
	want, _ := parseVersion(MinServerVersion)
	older := got == want && strings.ContainsRune(v, '-') // a pre-release comes before its release
	for i := range got {
		if got[i] != want[i] {
			older = got[i] < want[i]
			break
		}
	}
	if older {
		return fmt.Errorf("nats-server %s is older than %s, the oldest Intake runs on: earlier releases "+
			"can lose acknowledged JetStream writes after a crash or a peer removal (docs/guarantees.md, What a 2xx survives)", v, MinServerVersion)
	}
	return nil
}

// parseVersion reads major.minor.patch, ignoring a pre-release or build
// suffix.
func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}
