package ingress

import (
	"log/slog"
	"net/netip"
)

// sharedPeerRequests is how many requests sharedPeer looks at before it
// decides.
const sharedPeerRequests = 100

// sharedPeer watches the first requests of an ingress that trusts no proxy:
// when the first sharedPeerRequests all come from one private address, that
// address is most likely a proxy (an Ingress controller, a load balancer)
// the config does not name, and every client behind it shares one
// per-address bucket, so it logs one warning naming the address and the
// keys to set. It decides once per process, at the first request from
// another or a public address or at the last one counted, and costs
// nothing after. It is not safe for concurrent use: clientLimiter calls it
// under its lock.
type sharedPeer struct {
	private func(netip.Addr) bool // isPrivatePeer; a test may count loopback
	log     *slog.Logger

	first netip.Addr
	seen  int
}

// see counts one request from a and reports whether the watch has decided
// (the caller then drops it).
func (w *sharedPeer) see(a netip.Addr) (decided bool) {
	if w.seen == 0 {
		if !w.private(a) {
			return true
		}
		w.first = a
	} else if a != w.first {
		return true
	}
	w.seen++
	if w.seen < sharedPeerRequests {
		return false
	}
	w.log.Warn("ingress: every request so far came from one private address and no proxy is trusted: "+
		"if it is a proxy (an Ingress controller, a load balancer), all its clients share one per-address rate limit; "+
		"set ingress.trusted_proxies to its address or network and ingress.client_ip_header to the header it writes",
		"addr", w.first, "requests", w.seen)
	return true
}

// isPrivatePeer reports whether a is an address a proxy in front of ingress
// typically has: RFC 1918, RFC 6598 shared space (some clusters' pod and
// node networks) and IPv6 unique local addresses. Loopback is not (a
// sidecar or `intake dev` on a laptop), nor link-local.
func isPrivatePeer(a netip.Addr) bool {
	return a.IsPrivate() || sharedSpace.Contains(a)
}

var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")
