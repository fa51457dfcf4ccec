package ingress

import (
	"net/http"
	"net/netip"
	"testing"
	"time"
)

func TestClientAddress(t *testing.T) {
	trusted := clientAddrs{trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}, header: "X-Forwarded-For"}
	for _, tt := range []struct {
		name   string
		c      clientAddrs
		remote string
		xff    []string
		want   string
	}{
		{"no proxy configured: the peer", clientAddrs{}, "198.51.100.1:5000", []string{"203.0.113.9"}, "198.51.100.1"},
		{"untrusted peer: header ignored", trusted, "198.51.100.1:5000", []string{"203.0.113.9"}, "198.51.100.1"},
		{"trusted peer: the header's client", trusted, "10.1.2.3:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"rightmost untrusted wins over a spoofed left part", trusted, "10.1.2.3:5000", []string{"1.1.1.1, 203.0.113.9, 10.9.9.9"}, "203.0.113.9"},
		{"several header lines", trusted, "127.0.0.1:5000", []string{"1.1.1.1", "203.0.113.9"}, "203.0.113.9"},
		{"garbled entry: the peer", trusted, "10.1.2.3:5000", []string{"1.1.1.1, nonsense"}, "10.1.2.3"},
		{"an entry with a port (as some proxies write)", trusted, "10.1.2.3:5000", []string{"203.0.113.7:51234"}, "203.0.113.7"},
		{"a bracketed IPv6 entry with a port", trusted, "10.1.2.3:5000", []string{"[2001:db8:1:2::9]:443"}, "2001:db8:1:2::"},
		{"a bracketed IPv6 entry", trusted, "10.1.2.3:5000", []string{"[2001:db8:1:3::9]"}, "2001:db8:1:3::"},
		{"all trusted: the peer", trusted, "10.1.2.3:5000", []string{"10.0.0.9"}, "10.1.2.3"},
		{"IPv6 is cut to its /64", clientAddrs{}, "[2001:db8:1:2:3:4:5:6]:443", nil, "2001:db8:1:2::"},
		{"IPv4-mapped IPv6 is IPv4", clientAddrs{}, "[::ffff:198.51.100.1]:443", nil, "198.51.100.1"},
	} {
		r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{}}
		for _, v := range tt.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := tt.c.of(r); got != netip.MustParseAddr(tt.want) {
			t.Errorf("%s: %v, want %s", tt.name, got, tt.want)
		}
	}
}

func TestClientLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newClientLimiter(1, 3, 100)
	a := netip.MustParseAddr("203.0.113.9")
	for i := range 3 {
		if _, ok := l.take(a, now); !ok {
			t.Fatalf("request %d within the burst refused", i)
		}
	}
	wait, ok := l.take(a, now)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("over the burst: %v %v, want a wait of at most 1s", wait, ok)
	}
	l.refund(a) // a request that verified
	if _, ok := l.take(a, now); !ok {
		t.Fatal("a refunded token was not given back")
	}
	if _, ok := l.take(a, now.Add(time.Second)); !ok {
		t.Fatal("no token after a second at 1/s")
	}
}

// TestClientLimiterMemoryIsBounded: a million addresses leave at most
// max_clients tracked, and a new address is still served.
func TestClientLimiterMemoryIsBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newClientLimiter(1, 2, 1000)
	busy := netip.MustParseAddr("198.51.100.1")
	l.take(busy, now)
	l.take(busy, now)
	for i := range 1_000_000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		l.take(a, now.Add(time.Duration(i)*time.Microsecond))
		if n := len(l.buckets); n > 1000 {
			t.Fatalf("%d addresses tracked, max 1000", n)
		}
	}
	if _, ok := l.take(netip.MustParseAddr("203.0.113.1"), now); !ok {
		t.Fatal("a new address refused")
	}
}

func TestLimiterDisabled(t *testing.T) {
	if newClientLimiter(-1, 1, 1) != nil {
		t.Fatal("per_second -1 must disable the limit")
	}
}
