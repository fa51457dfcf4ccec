package provider

// Signed timestamps bound how long a captured delivery can be replayed. Every
// scheme here sends unix seconds as decimal text; they differ in the window:
// Standard Webhooks, Svix, Slack and hmac allow ± tolerance, Stripe only
// bounds the past (its library accepts any future timestamp).

import (
	"fmt"
	"strconv"
	"time"
)

// parseUnixSeconds reads a decimal unix time in seconds. Only digits are
// accepted: "+17…", " 17…" or "17….5" are never what a sender means, and a
// header that means something else should not verify by accident.
func parseUnixSeconds(ts string) (int64, error) {
	if ts == "" {
		return 0, fmt.Errorf("%w: empty", ErrTimestamp)
	}
	for i := 0; i < len(ts); i++ {
		if ts[i] < '0' || ts[i] > '9' {
			return 0, fmt.Errorf("%w: not a unix time in seconds", ErrTimestamp)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: not a unix time in seconds", ErrTimestamp)
	}
	return sec, nil
}

// checkWithin fails unless sec lies within tolerance of now in either
// direction; the boundary itself is inside.
func checkWithin(sec int64, now time.Time, tolerance time.Duration) error {
	// Sub saturates, so absurd timestamps land outside the window, not wrap.
	if skew := now.Sub(time.Unix(sec, 0)); skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w: %s away from now", ErrTimestamp, skew.Round(time.Second))
	}
	return nil
}

// checkNotOlder fails when sec is more than tolerance before now; later
// timestamps pass, as in stripe-go.
func checkNotOlder(sec int64, now time.Time, tolerance time.Duration) error {
	if age := now.Sub(time.Unix(sec, 0)); age > tolerance {
		return fmt.Errorf("%w: %s old", ErrTimestamp, age.Round(time.Second))
	}
	return nil
}
