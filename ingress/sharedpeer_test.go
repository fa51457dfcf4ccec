package ingress

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestIsPrivatePeer(t *testing.T) {
	for _, tt := range []struct {
		addr string
		want bool
	}{
		{"10.0.0.1", true},
		{"10.255.255.255", true},
		{"172.16.0.1", true},
		{"172.31.255.254", true},
		{"172.32.0.1", false},
		{"192.168.1.10", true},
		{"100.64.0.1", true}, // RFC 6598, some clusters' pod networks
		{"100.127.255.254", true},
		{"100.128.0.1", false},
		{"fd00:1:2:3::", true}, // ULA, as a /64 (the limiter's key)
		{"fc00::1", true},
		{"127.0.0.1", false}, // loopback: a sidecar, or a laptop
		{"::1", false},
		{"169.254.1.1", false}, // link-local
		{"fe80::1", false},
		{"203.0.113.7", false},
		{"8.8.8.8", false},
		{"2001:db8:1:2::", false},
	} {
		if got := isPrivatePeer(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("isPrivatePeer(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

// TestSharedPeerDecidesOnce: the limiter warns once when its first
// sharedPeerRequests requests all come from one private address, never
// when another or a public address is among them, and stops watching once
// it has decided.
func TestSharedPeerDecidesOnce(t *testing.T) {
	private, other, public := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.1.2.4"), netip.MustParseAddr("203.0.113.7")
	for _, tt := range []struct {
		name  string
		addrs func(i int) netip.Addr
		warn  bool
	}{
		{"one private address", func(int) netip.Addr { return private }, true},
		{"a second private address among them", func(i int) netip.Addr {
			if i == sharedPeerRequests/2 {
				return other
			}
			return private
		}, false},
		{"the last one counted from another address", func(i int) netip.Addr {
			if i == sharedPeerRequests-1 {
				return other
			}
			return private
		}, false},
		{"a public address first", func(i int) netip.Addr {
			if i == 0 {
				return public
			}
			return private
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			c := newClientLimiter(1e9, 1e9, 16)
			c.peers = &sharedPeer{private: isPrivatePeer, log: slog.New(slog.NewTextHandler(&logs, nil))}
			now := time.Now()
			for i := range 3 * sharedPeerRequests {
				c.take(tt.addrs(i), now)
				if i == sharedPeerRequests-1 && c.peers != nil {
					t.Fatalf("still watching after %d requests, want decided", i+1)
				}
			}
			n := strings.Count(logs.String(), "level=WARN")
			if want := map[bool]int{true: 1, false: 0}[tt.warn]; n != want {
				t.Fatalf("%d warnings, want %d:\n%s", n, want, &logs)
			}
			if tt.warn {
				for _, want := range []string{"addr=10.1.2.3", "ingress.trusted_proxies", "ingress.client_ip_header"} {
					if !strings.Contains(logs.String(), want) {
						t.Errorf("warning %q does not name %q", &logs, want)
					}
				}
			}
		})
	}
}

// The watch costs no allocation per request, deciding or decided.
func TestSharedPeerAllocatesNothing(t *testing.T) {
	c := newClientLimiter(1e9, 1e9, 16)
	c.peers = &sharedPeer{private: isPrivatePeer, log: slog.New(slog.DiscardHandler)}
	a, now := netip.MustParseAddr("10.1.2.3"), time.Now()
	c.take(a, now) // the bucket's one allocation
	if n := testing.AllocsPerRun(sharedPeerRequests/2, func() { c.take(a, now) }); n != 0 {
		t.Errorf("take while watching: %v allocations, want 0", n)
	}
}
