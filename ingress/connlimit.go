package ingress

import (
	"io"
	"net"
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

// LimitListener caps the open connections accepted from ln at max. One more
// is answered 503 + Retry-After and closed at once (over TLS, where a plain
// answer cannot be written, it is closed only); onRefused, if set, is
// called for each.
func LimitListener(ln net.Listener, max int, tls bool, onRefused func()) net.Listener {
	return &limitListener{Listener: ln, max: int64(max), tls: tls, onRefused: onRefused}
}

type limitListener struct {
	net.Listener
	max       int64
	open      atomic.Int64
	refusing  atomic.Int64
	tls       bool
	onRefused func()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
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
func (l *limitListener) refuse(c net.Conn) {
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
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
