package ingress

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// clientLimiter is the per-client-address token bucket charged before the
// signature check. A request that verifies gets its token back (refund), so
// the limit counts unsigned and badly signed requests only: a genuine
// sender sharing an address with nobody hostile is never limited by it.
// At most max addresses are tracked; a full table forgets addresses whose
// bucket has refilled (they lose nothing), and starts over when that frees
// less than half — an attacker with that many addresses gains one burst
// each, memory stays bounded, and the sweep stays rare (amortised O(1)).
type clientLimiter struct {
	perSecond float64
	burst     float64
	max       int

	mu      sync.Mutex
	buckets map[netip.Addr]*bucket
	peers   *sharedPeer // nil once decided, or when a proxy is trusted
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newClientLimiter(perSecond float64, burst, max int) *clientLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &clientLimiter{perSecond: perSecond, burst: float64(burst), max: max, buckets: map[netip.Addr]*bucket{}}
}

// take takes one token of addr's bucket at now, or reports how long until
// one is free.
func (c *clientLimiter) take(addr netip.Addr, now time.Time) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.peers != nil && c.peers.see(addr) {
		c.peers = nil
	}
	b, ok := c.buckets[addr]
	if !ok {
		if len(c.buckets) >= c.max {
			c.forget(now)
		}
		b = &bucket{tokens: c.burst, at: now}
		c.buckets[addr] = b
	}
	c.refill(b, now)
	if b.tokens < 1 {
		return time.Duration((1 - b.tokens) / c.perSecond * float64(time.Second)), false
	}
	b.tokens--
	return 0, true
}

// refund gives back the token of a request that verified.
func (c *clientLimiter) refund(addr netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.buckets[addr]; ok {
		b.tokens = min(c.burst, b.tokens+1)
	}
}

func (c *clientLimiter) refill(b *bucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(c.burst, b.tokens+d.Seconds()*c.perSecond)
		b.at = now
	}
}

// forget drops the addresses whose bucket is full again; when that leaves
// more than half, the whole table.
func (c *clientLimiter) forget(now time.Time) {
	for a, b := range c.buckets {
		c.refill(b, now)
		if b.tokens >= c.burst {
			delete(c.buckets, a)
		}
	}
	if len(c.buckets) > c.max/2 {
		clear(c.buckets)
	}
}

// clientAddrs finds a request's client address: the TCP peer, or, when the
// peer is a trusted proxy, the rightmost address in the configured header
// that is not a trusted proxy. IPv6 addresses are cut to their /64, the
// smallest network a client usually controls.
type clientAddrs struct {
	trusted []netip.Prefix
	header  string
}

func (c clientAddrs) of(r *http.Request) netip.Addr {
	peer := parseAddr(r.RemoteAddr)
	if c.header != "" && c.isTrusted(peer) {
		values := r.Header.Values(c.header)
		for i := len(values) - 1; i >= 0; i-- {
			parts := strings.Split(values[i], ",")
			for j := len(parts) - 1; j >= 0; j-- {
				a, err := parseForwarded(strings.TrimSpace(parts[j]))
				if err != nil {
					return scope(peer) // a garbled chain: trust no further
				}
				a = a.Unmap()
				if !c.isTrusted(a) {
					return scope(a)
				}
			}
		}
	}
	return scope(peer)
}

// parseForwarded reads one entry of a forwarding header: an address, or an
// address with a port ("203.0.113.7:51234", "[2001:db8::1]:443"), as some
// proxies write it.
func parseForwarded(s string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a, nil
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), nil
	}
	return netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
}

func (c clientAddrs) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func parseAddr(hostport string) netip.Addr {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

func scope(a netip.Addr) netip.Addr {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}
