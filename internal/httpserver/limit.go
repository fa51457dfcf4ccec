package httpserver

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// busyResponse answers a connection over the cap: written straight to the
// socket, before any request is read, so it costs no goroutine per request
// and no buffers.
const busyResponse = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n" +
	"Cache-Control: no-store\r\nConnection: close\r\nContent-Length: 47\r\n\r\n" +
	`{"status":"unavailable","reason":"connections"}`

// LimitListener caps the open connections accepted from ln at max. At the
// cap, a connection that has sat idle between requests for at least
// idleEvictAfter (a keep-alive nobody uses, or someone holding sockets to
// fill the cap) is closed to make room; only when none has, one more is
// answered 503 + Retry-After and closed at once (over TLS, where a plain
// answer cannot be written, it is closed only); onRefused, if set, is
// called for each. The server must report its connections' states to
// ConnState (http.Server.ConnState) for idle ones to be known.
func LimitListener(ln net.Listener, max int, tls bool, onRefused func()) *Limited {
	return &Limited{Listener: ln, max: int64(max), tls: tls, onRefused: onRefused, idle: map[net.Conn]time.Time{}}
}

// idleEvictAfter is how long a connection must have been idle before a new
// one at the cap takes its place: far longer than a client reusing a
// keep-alive connection between two requests needs, so a busy client's
// connection is not closed under a request it is about to send.
const idleEvictAfter = time.Second

// Limited is the listener LimitListener returns.
type Limited struct {
	net.Listener
	max       int64
	open      atomic.Int64
	refusing  atomic.Int64
	tls       bool
	onRefused func()

	mu   sync.Mutex
	idle map[net.Conn]time.Time // connections idle between requests, since when
}

// ConnState tracks which connections are idle between requests; chain it
// into http.Server.ConnState.
func (l *Limited) ConnState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == http.StateIdle {
		l.idle[c] = time.Now()
	} else {
		delete(l.idle, c)
	}
}

// evictIdle closes the connection idle longest, if it has been idle for
// idleEvictAfter, and reports whether it did.
func (l *Limited) evictIdle(now time.Time) bool {
	l.mu.Lock()
	var oldest net.Conn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	if oldest == nil || now.Sub(since) < idleEvictAfter {
		l.mu.Unlock()
		return false
	}
	delete(l.idle, oldest)
	l.mu.Unlock()
	_ = oldest.Close() // its limitConn gives its place back
	return true
}

// Accept accepts the next connection within the cap.
func (l *Limited) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitConn{Conn: c, l: l}, nil
		}
		if l.evictIdle(time.Now()) {
			// Over the cap by one until the evicted connection's Close
			// has given its place back, which it has by now.
			return &limitConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		if l.onRefused != nil {
			l.onRefused()
		}
		if l.tls || l.refusing.Add(1) > maxRefusing {
			l.refusing.Add(-1)
			_ = c.Close()
			continue
		}
		go l.refuse(c)
	}
}

// maxRefusing bounds the goroutines answering refused connections: beyond
// it a refused connection is closed without an answer.
const maxRefusing = 256

// refuse writes the busy answer, stops sending, and reads what the client
// still sends for a moment before closing: closing with unread data resets
// the connection, and the client might never see the answer.
func (l *Limited) refuse(c net.Conn) {
	defer l.refusing.Add(-1)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(busyResponse)); err != nil {
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_, _ = io.CopyN(io.Discard, c, 64<<10)
}

type limitConn struct {
	net.Conn
	l    *Limited
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
