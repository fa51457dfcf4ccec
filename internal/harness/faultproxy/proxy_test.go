package faultproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/faultproxy"
)

// echo serves lines back on a loopback port until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func setup(t *testing.T) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func dial(t *testing.T, p *faultproxy.Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes a line and reads it back within wait.
func roundTrip(c net.Conn, wait time.Duration) error {
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err == nil && line != "ping\n" {
		err = errors.New("echoed " + line)
	}
	return err
}

// A blackhole freezes the flows it finds and hangs the new ones: no byte
// comes back and nothing is closed. After the heal new flows pass and the
// frozen ones stay dead but open.
func TestBlackholeHangsFlowsAndTheHealLeavesThemDead(t *testing.T) {
	p := setup(t)
	old := dial(t, p)
	if err := roundTrip(old, 5*time.Second); err != nil {
		t.Fatalf("pass: %v", err)
	}

	p.SetMode(faultproxy.Blackhole)
	hung := dial(t, p) // accepted: a blackhole does not refuse
	for name, c := range map[string]net.Conn{"existing flow": old, "new flow": hung} {
		if err := roundTrip(c, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("blackhole, %s: read = %v, want a timeout (no answer, no close)", name, err)
		}
	}

	p.SetMode(faultproxy.Pass)
	if err := roundTrip(dial(t, p), 5*time.Second); err != nil {
		t.Errorf("healed, new flow: %v", err)
	}
	for name, c := range map[string]net.Conn{"frozen flow": old, "hung flow": hung} {
		if err := roundTrip(c, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("healed, %s: read = %v, want it still dead but open", name, err)
		}
	}
	if n := p.Flows(); n != 3 {
		t.Errorf("flows held = %d, want 3 (two frozen, one passing)", n)
	}
}

// Reset closes every flow with an RST, and resets new ones.
func TestResetClosesEveryFlowWithRST(t *testing.T) {
	p := setup(t)
	c := dial(t, p)
	if err := roundTrip(c, 5*time.Second); err != nil {
		t.Fatalf("pass: %v", err)
	}
	p.SetMode(faultproxy.Reset)
	if err := roundTrip(c, 5*time.Second); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Errorf("reset, existing flow: %v, want connection reset", err)
	}
	// The RST may come before the dial returns, or on the first read.
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		defer c.Close()
		if err := roundTrip(c, 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("reset, new flow: %v, want it closed", err)
		}
	}
	p.SetMode(faultproxy.Pass)
	if err := roundTrip(dial(t, p), 5*time.Second); err != nil {
		t.Errorf("after reset, new flow: %v", err)
	}
}
