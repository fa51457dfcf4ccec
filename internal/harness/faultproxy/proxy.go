// Package faultproxy is a TCP proxy for fault tests: it sits between a role
// and Postgres or NATS and passes bytes, blackholes them (accepts and keeps
// every flow open but forwards nothing, as a network partition that drops
// packets does) or resets every flow. A blackhole leaves the flows it froze
// dead but open after the heal, as a real partition does: a client must
// notice them by its own deadlines.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what the proxy does to flows.
type Mode int32

const (
	// Pass forwards bytes both ways.
	Pass Mode = iota
	// Blackhole forwards nothing and closes nothing: new flows are
	// accepted and left hanging, existing ones stop moving bytes (for
	// good: a flow frozen once stays frozen after a heal).
	Blackhole
	// Reset closes every flow at once with a TCP RST and resets new ones.
	Reset
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Blackhole:
		return "blackhole"
	case Reset:
		return "reset"
	}
	return "unknown"
}

// Proxy listens on 127.0.0.1 and forwards each accepted flow to its target.
type Proxy struct {
	target string
	ln     net.Listener
	mode   atomic.Int32

	mu     sync.Mutex
	flows  map[*flow]struct{}
	closed bool
	wg     sync.WaitGroup
}

// flow is one client connection and its upstream. frozen is set when a
// blackhole caught it: its copiers stop and it is never closed until Close.
type flow struct {
	client, upstream net.Conn
	frozen           atomic.Bool
}

// New listens on 127.0.0.1:0 and forwards to target (host:port), in Pass.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, flows: map[*flow]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address to dial instead of the target ("127.0.0.1:port").
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Mode is the mode in force.
func (p *Proxy) Mode() Mode { return Mode(p.mode.Load()) }

// Flows counts the flows the proxy holds, frozen ones included.
func (p *Proxy) Flows() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.flows)
}

// SetMode switches every flow, existing and new, to m. Back to Pass heals
// the proxy for new flows; flows a blackhole froze stay frozen.
func (p *Proxy) SetMode(m Mode) {
	p.mode.Store(int32(m))
	p.mu.Lock()
	defer p.mu.Unlock()
	for f := range p.flows {
		switch m {
		case Blackhole:
			f.freeze()
		case Reset:
			p.reset(f)
		}
	}
}

// Close stops listening and closes every flow, frozen ones too.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for f := range p.flows {
		_ = f.client.Close()
		f.closeUpstream()
		delete(p.flows, f)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target for c and copies both ways until either side
// ends, the flow is reset, or a blackhole freezes it.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	switch p.Mode() {
	case Reset:
		rst(c)
		return
	case Blackhole:
		// Accepted, never answered, never closed (until Close).
		p.track(&flow{client: c})
		return
	}
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		rst(c)
		return
	}
	f := &flow{client: c, upstream: u}
	if !p.track(f) {
		return
	}
	var done sync.WaitGroup
	done.Add(2)
	go func() { defer done.Done(); f.copy(u, c) }()
	go func() { defer done.Done(); f.copy(c, u) }()
	done.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.frozen.Load() && !p.closed {
		if _, ok := p.flows[f]; ok {
			return // kept open until Close (or a Reset)
		}
	}
	delete(p.flows, f)
	_ = c.Close()
	_ = u.Close()
}

// track adds f to the flows, frozen if a blackhole is in force (read under
// p.mu, so a SetMode racing with it catches f either way); false when the
// proxy is closed or resetting (f is closed).
func (p *Proxy) track(f *flow) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.Mode() == Reset {
		rst(f.client)
		f.closeUpstream()
		return false
	}
	if p.Mode() == Blackhole || f.upstream == nil {
		f.freeze()
	}
	p.flows[f] = struct{}{}
	return true
}

// copy moves bytes from src to dst until src ends or the flow freezes. A
// frozen flow's bytes read before the freeze are dropped, as a partition
// drops packets in flight. When src ends the other direction is stopped
// too, unless it was a clean end (EOF: half-closed), or frozen.
func (f *flow) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if f.frozen.Load() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if f.frozen.Load() {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				_ = tc.CloseWrite() // the other direction goes on
				return
			}
			_ = src.Close()
			_ = dst.Close()
			return
		}
	}
}

// freeze stops the flow's copiers without closing its sockets: a read in
// progress is woken by a past deadline, which leaves the socket open and
// unread, so the peer's bytes pile up in the kernel's buffers.
func (f *flow) freeze() {
	if f.frozen.Swap(true) {
		return
	}
	_ = f.client.SetReadDeadline(aLongTimeAgo)
	if f.upstream != nil {
		_ = f.upstream.SetReadDeadline(aLongTimeAgo)
	}
}

// aLongTimeAgo is a deadline that has passed: it wakes a blocked Read.
var aLongTimeAgo = time.Unix(1, 0)

// closeUpstream closes the upstream, if the flow has one.
func (f *flow) closeUpstream() {
	if f.upstream != nil {
		_ = f.upstream.Close()
	}
}

// reset closes f with RST on both sides and forgets it. p.mu is held.
func (p *Proxy) reset(f *flow) {
	delete(p.flows, f)
	f.frozen.Store(false)
	rst(f.client)
	if f.upstream != nil {
		rst(f.upstream)
	}
}

// rst closes c with an RST instead of a FIN (SO_LINGER 0).
func rst(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
