package replayer

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// failureThrottle counts failed authentications per client address: each
// failure takes a token from the address's bucket (MaxFailures per Window,
// refilled evenly); an address with an empty bucket is refused — even with a
// correct token — until a token is back. Its memory is bounded: at most
// maxClients addresses are tracked; beyond that, addresses whose bucket is
// full again are forgotten first, then the one that failed longest ago.
type failureThrottle struct {
	limit      rate.Limit
	burst      int
	maxClients int

	mu      sync.Mutex
	clients map[string]*failures
}

type failures struct {
	lim  *rate.Limiter
	last time.Time
}

func newFailureThrottle(maxFailures int, window time.Duration, maxClients int) *failureThrottle {
	return &failureThrottle{
		limit:      rate.Limit(float64(maxFailures) / window.Seconds()),
		burst:      maxFailures,
		maxClients: maxClients,
		clients:    map[string]*failures{},
	}
}

// blocked reports whether addr has used up its failures at now, and how
// long until it may try again.
func (t *failureThrottle) blocked(addr string, now time.Time) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.clients[addr]
	if !ok {
		return 0, false
	}
	tokens := f.lim.TokensAt(now)
	if tokens >= 1 {
		return 0, false
	}
	return time.Duration(math.Ceil((1 - tokens) / float64(t.limit) * float64(time.Second))), true
}

// fail records a failed authentication of addr at now.
func (t *failureThrottle) fail(addr string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.clients[addr]
	if !ok {
		if len(t.clients) >= t.maxClients {
			t.evict(now)
		}
		f = &failures{lim: rate.NewLimiter(t.limit, t.burst)}
		t.clients[addr] = f
	}
	f.lim.AllowN(now, 1)
	f.last = now
}

// evict makes room for one address (t.mu held).
func (t *failureThrottle) evict(now time.Time) {
	var oldest string
	for addr, f := range t.clients {
		if f.lim.TokensAt(now) >= float64(t.burst) {
			delete(t.clients, addr) // cooled down: nothing to remember
		} else if oldest == "" || f.last.Before(t.clients[oldest].last) {
			oldest = addr
		}
	}
	if len(t.clients) >= t.maxClients && oldest != "" {
		delete(t.clients, oldest)
	}
}

// tracked is the number of addresses remembered (tests).
func (t *failureThrottle) tracked() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.clients)
}
