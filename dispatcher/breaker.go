package dispatcher

import (
	"sync"
	"time"

	"github.com/intakehq/intake/pkg/config"
)

// breaker is a destination's circuit breaker. Closed, every delivery goes.
// After `failures` retryable failures in a row it opens: nothing is
// fetched for the destination until the probe wait has passed, then one
// delivery goes (half-open). An answer the receiver meant (any status but
// 408, 429 and 5xx) closes it; another failure opens it again for twice the
// wait, up to config.BreakerProbeCeiling (or the first wait, if longer), so
// a destination back from a long outage is found within two minutes.
type breaker struct {
	mu        sync.Mutex
	threshold int
	base      time.Duration
	wait      time.Duration // the current probe wait
	failures  int           // retryable failures in a row
	open      bool
	openUntil time.Time
	probing   bool // half-open: the one probe is out
}

func newBreaker(c config.DestinationBreaker) *breaker {
	return &breaker{threshold: c.Failures, base: c.Probe, wait: c.Probe}
}

// allow reports whether a delivery may go now; probe is set when it is the
// half-open breaker's one probe (fetch one message only). When it may not,
// retry is how long to wait before asking again.
func (b *breaker) allow(now time.Time) (ok, probe bool, retry time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.open:
		return true, false, 0
	case b.probing:
		return false, false, 100 * time.Millisecond
	case now.Before(b.openUntil):
		return false, false, b.openUntil.Sub(now)
	}
	b.probing = true
	return true, true, 0
}

// cancelProbe gives the probe back when it was not sent (shutdown).
func (b *breaker) cancelProbe() {
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// record counts an attempt's answer: answered is false for a retryable
// failure. changed reports that the breaker opened or closed; open is its
// state after.
func (b *breaker) record(now time.Time, answered bool) (changed, open bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if answered {
		b.failures = 0
		changed = b.open
		b.open, b.probing, b.wait = false, false, b.base
		return changed, false
	}
	b.failures++
	switch {
	case b.open && b.probing:
		b.probing = false
		b.wait = min(2*b.wait, max(b.base, config.BreakerProbeCeiling))
		b.openUntil = now.Add(b.wait)
	case !b.open && b.failures >= b.threshold:
		b.open, b.openUntil, b.wait = true, now.Add(b.base), b.base
		return true, true
	}
	return false, b.open
}

// isOpen reports the breaker's state.
func (b *breaker) isOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}
