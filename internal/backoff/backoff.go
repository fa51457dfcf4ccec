// Package backoff spaces the retries of a loop that waits for something to
// come back (a database, a JetStream API, a consumer): each wait grows
// exponentially up to a cap and is jittered, so processes that lost the same
// dependency at the same moment do not retry in lockstep when it returns.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is an exponential backoff with "equal jitter": the wait before
// retry n (counting from 0) is uniform in [c/2, c], where the ceiling c is
// Min·2ⁿ capped at Max. The zero value is not useful; set both fields.
type Backoff struct {
	// Min is the ceiling of the first wait (attempt 0).
	Min time.Duration
	// Max caps every wait.
	Max time.Duration
}

// Ceiling is the longest wait Next may return for attempt: Min·2^attempt,
// capped at Max. Negative attempts count as 0.
func (b Backoff) Ceiling(attempt int) time.Duration {
	c := b.Min
	for range max(attempt, 0) {
		if c >= b.Max/2 {
			return b.Max
		}
		c *= 2
	}
	return min(c, b.Max)
}

// Next is the wait before retry attempt: uniform in [Ceiling/2, Ceiling].
// It is safe for concurrent use.
func (b Backoff) Next(attempt int) time.Duration {
	c := b.Ceiling(attempt)
	half := c / 2
	if c-half <= 0 {
		return c
	}
	return half + rand.N(c-half+1)
}

// Sleep waits for d or until ctx ends, whichever comes first, and returns
// ctx's error in the second case.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
