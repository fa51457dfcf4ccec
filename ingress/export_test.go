package ingress

import "net/netip"

// CountLoopbackAsPrivate makes s's shared-peer watch take a loopback peer
// for a private one, as a proxy's: a test can send from loopback only. Call
// it before s serves.
func CountLoopbackAsPrivate(s *Service) {
	if s.clients != nil && s.clients.peers != nil {
		s.clients.peers.private = func(a netip.Addr) bool { return a.IsLoopback() || isPrivatePeer(a) }
	}
}
