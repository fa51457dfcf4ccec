package apiclient

import (
	"strconv"
	"strings"
	"time"
)

// Ago reads a relative time as an operator types it, in the CLI's --since
// and --until and in the console's filters alike: a Go duration ("90m",
// "2h30m") or whole days ("2d", "7d"), which must not be negative. ok is
// false for anything else (an RFC 3339 time is the caller's to try first).
func Ago(s string) (d time.Duration, ok bool) {
	if days, found := strings.CutSuffix(s, "d"); found {
		n, err := strconv.ParseUint(days, 10, 16) // up to 65535 days: a range, not an overflow
		if err != nil {
			return 0, false
		}
		return time.Duration(n) * 24 * time.Hour, true
	}
	d, err := time.ParseDuration(s)
	return d, err == nil && d >= 0
}
