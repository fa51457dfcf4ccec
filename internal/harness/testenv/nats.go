package testenv

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/intakehq/intake/internal/harness/natsserver"
)

// errPortBusy is checked before starting: nats-server does not report a
// failed listen, it only times out waiting to become ready.
var errPortBusy = errors.New("port in use")

// NATSServer is an embedded nats-server with JetStream, private to one test.
// Its address and store directory stay the same across Restart, so clients
// reconnect and stream contents survive.
type NATSServer struct {
	port int
	dir  string

	mu  sync.Mutex
	emb *natsserver.Embedded // nil while stopped
}

// NATS starts an embedded nats-server with JetStream (file storage in a temp
// dir) on a free loopback port, and shuts it down when the test ends.
func NATS(t testing.TB) *NATSServer {
	t.Helper()
	n := &NATSServer{dir: t.TempDir()}
	// Restart must come back on the same port, so the port is chosen here
	// rather than by the server (port 0). Choosing races with other
	// processes; choose again when the port is taken.
	var err error
	for range 5 {
		n.port = FreePort(t)
		if err = n.start(); !errors.Is(err, errPortBusy) {
			break
		}
	}
	if err != nil {
		t.Fatalf("testenv: embedded nats-server: %v", err)
	}
	t.Cleanup(n.stop)
	return n
}

// URL is the client URL; it stays valid across Restart.
func (n *NATSServer) URL() string {
	return "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))
}

// Port is the client port on 127.0.0.1.
func (n *NATSServer) Port() int { return n.port }

// Server is the running server, for inspecting JetStream state; nil while stopped.
func (n *NATSServer) Server() *server.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.emb == nil {
		return nil
	}
	return n.emb.Server()
}

// Restart shuts the server down and starts it again on the same port and
// store directory. Clients with reconnect enabled reconnect by themselves.
func (n *NATSServer) Restart(t testing.TB) {
	t.Helper()
	n.Stop(t)
	n.Start(t)
}

// Stop shuts the server down and waits until it is down. Stop on a stopped
// server does nothing.
func (n *NATSServer) Stop(t testing.TB) {
	t.Helper()
	n.stop()
}

// Start starts a stopped server again on the same port and store directory.
func (n *NATSServer) Start(t testing.TB) {
	t.Helper()
	// The port was ours until Stop; should another process have grabbed it
	// in between, give it a moment to let go rather than fail at once.
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err = n.start(); !errors.Is(err, errPortBusy) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling the port, not guessing a duration
	}
	if err != nil {
		t.Fatalf("testenv: restart embedded nats-server: %v", err)
	}
}

func (n *NATSServer) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.emb != nil {
		return nil
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", addr, errPortBusy)
	}
	_ = l.Close()
	emb, err := natsserver.Run(natsserver.Config{
		Addr:         addr,
		StoreDir:     n.dir,
		ServerName:   "testenv-" + strconv.Itoa(n.port),
		ReadyTimeout: 10 * time.Second,
	})
	if err != nil {
		return err
	}
	n.emb = emb
	return nil
}

func (n *NATSServer) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.emb == nil {
		return
	}
	n.emb.Shutdown()
	n.emb = nil
}
