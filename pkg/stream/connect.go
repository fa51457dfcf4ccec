package stream

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake/pkg/config"
)

// Connect dials NATS with reconnects forever: a NATS restart must not kill a
// role, it must pause it. bufferOnReconnect false disables the client's
// reconnect buffer so that ingress fails a publish at once (503, the provider
// retries) instead of answering after a buffered write it cannot confirm.
func Connect(url, name string, bufferOnReconnect bool, log *slog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil && log != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			if log != nil {
				log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
			}
		}),
	}
	if !bufferOnReconnect {
		opts = append(opts, nats.ReconnectBufSize(-1))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats connect %s: %w", config.Redact(url), err)
	}
	return nc, nil
}
