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

// timestampFormat is how a configurable scheme (pairs, hmac, pubkey) writes
// its signed timestamp.
type timestampFormat uint8

const (
	formatUnix    timestampFormat = iota // decimal unix seconds
	formatUnixMS                         // decimal unix milliseconds
	formatRFC3339                        // RFC 3339 with a zone, optional fraction
)

// parseTimestampFormat reads a timestamp_format option ("" is unix).
func parseTimestampFormat(s string) (timestampFormat, error) {
	switch s {
	case "", "unix":
		return formatUnix, nil
	case "unix_ms":
		return formatUnixMS, nil
	case "rfc3339":
		return formatRFC3339, nil
	}
	return 0, fmt.Errorf("unknown %q (unix, unix_ms or rfc3339)", s)
}

func (f timestampFormat) String() string {
	return [...]string{"unix seconds", "unix milliseconds", "an RFC 3339 time"}[f]
}

// parse reads ts strictly in format f. With canonical, unix values must have
// no leading zero: "0170…" and "170…" are one time, and a template that puts
// the timestamp next to another placeholder needs every time to have one
// spelling (see checkAdjacency).
func (f timestampFormat) parse(ts string, canonical bool) (time.Time, error) {
	switch f {
	case formatRFC3339:
		if !strictRFC3339(ts) {
			return time.Time{}, fmt.Errorf("%w: not an RFC 3339 time", ErrTimestamp)
		}
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: not an RFC 3339 time", ErrTimestamp)
		}
		return t, nil
	default:
		n, err := parseUnixSeconds(ts)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: not %s", ErrTimestamp, f)
		}
		if canonical && len(ts) > 1 && ts[0] == '0' {
			return time.Time{}, fmt.Errorf("%w: leading zero", ErrTimestamp)
		}
		if f == formatUnixMS {
			return time.UnixMilli(n), nil
		}
		return time.Unix(n, 0), nil
	}
}

// strictRFC3339 accepts exactly YYYY-MM-DDTHH:MM:SS[.F{1,9}](Z|±HH:MM), the
// grammar whose strings are never a prefix or a suffix of one another (the
// year's four digits start it, a zone ends it), which checkAdjacency relies on.
func strictRFC3339(s string) bool {
	const base = len("2006-01-02T15:04:05")
	if len(s) < base+1 {
		return false
	}
	for i := 0; i < base; i++ {
		c := s[i]
		switch i {
		case 4, 7:
			if c != '-' {
				return false
			}
		case 10:
			if c != 'T' {
				return false
			}
		case 13, 16:
			if c != ':' {
				return false
			}
		default:
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	rest := s[base:]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 || n > 10 {
			return false
		}
		rest = rest[n:]
	}
	switch {
	case rest == "Z":
		return true
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		for _, i := range []int{1, 2, 4, 5} {
			if rest[i] < '0' || rest[i] > '9' {
				return false
			}
		}
		return true
	}
	return false
}

// timeWindow is which side of now a signed timestamp is bounded on.
type timeWindow uint8

const (
	windowBoth timeWindow = iota // ± tolerance (Standard Webhooks, Slack, Paddle)
	windowPast                   // no older than tolerance, any future (Stripe, WorkOS)
)

func parseWindow(s string) (timeWindow, error) {
	switch s {
	case "", "both":
		return windowBoth, nil
	case "past":
		return windowPast, nil
	}
	return 0, fmt.Errorf("unknown %q (both or past)", s)
}

// check fails unless t lies in the window around now; the boundary is inside.
func (w timeWindow) check(t, now time.Time, tolerance time.Duration) error {
	skew := now.Sub(t) // saturates
	if skew > tolerance || (w == windowBoth && skew < -tolerance) {
		return fmt.Errorf("%w: %s away from now", ErrTimestamp, skew.Round(time.Second))
	}
	return nil
}
