package ingress

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// allow takes one token at now, or reports how long until one is free
// without taking it: a refused request must not delay the next ones.
func allow(l *rate.Limiter, now time.Time) (time.Duration, bool) {
	r := l.ReserveN(now, 1)
	if !r.OK() {
		return time.Second, false
	}
	wait := r.DelayFrom(now)
	if wait == 0 {
		return 0, true
	}
	r.CancelAt(now)
	return wait, false
}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1, as
// Retry-After carries delta-seconds.
func retryAfterSeconds(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}
