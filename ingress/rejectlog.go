package ingress

import (
	"sync"
	"time"
)

// rejectLogBurst is how many "webhook rejected" lines each (integration,
// reason) writes per second; rejectLogWindow is that second.
const (
	rejectLogBurst  = 5
	rejectLogWindow = time.Second
)

// rejectLog rate-limits the "webhook rejected" lines. A flood of refused
// requests (bad signatures, replayed deliveries past a rate limit) wrote a
// line each: 10,726 lines in 4 s, the log's volume set by whoever sends.
// Every rejection is still counted (intake_ingress_rejected_total); the log
// keeps the first rejectLogBurst of each integration and reason per
// window, and the next line of that pair after a window that left some out
// says how many (suppressed). Its memory is bounded: integrations come from
// the config and reasons are ingress's own constants.
type rejectLog struct {
	mu      sync.Mutex
	windows map[rejectKey]*rejectWindow
}

type rejectKey struct{ integration, reason string }

type rejectWindow struct {
	start           time.Time
	logged, dropped int
}

// allow reports whether a rejection of integration for reason at now gets
// its line, and, when it does, how many lines of the pair the previous
// window left out.
func (l *rejectLog) allow(integration, reason string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := rejectKey{integration, reason}
	w := l.windows[k]
	if w == nil {
		if l.windows == nil {
			l.windows = map[rejectKey]*rejectWindow{}
		}
		w = &rejectWindow{start: now}
		l.windows[k] = w
	}
	if now.Sub(w.start) >= rejectLogWindow {
		suppressed = w.dropped
		*w = rejectWindow{start: now}
	}
	if w.logged >= rejectLogBurst {
		w.dropped++
		return false, 0
	}
	w.logged++
	return true, suppressed
}
