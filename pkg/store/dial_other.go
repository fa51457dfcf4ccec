//go:build !linux

package store

import (
	"syscall"
	"time"
)

// tcpUserTimeout is Linux's only; elsewhere keepalive alone finds a dead peer.
func tcpUserTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
