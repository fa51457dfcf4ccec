package stream

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake/pkg/config"
)

// A silent connection (a partition that drops packets, a frozen server) is
// noticed by the client's pings: one every PingInterval, the connection
// given up when MaxPingsOutstanding go unanswered, within about
// PingInterval × (MaxPingsOutstanding+1), then reconnected. nats.go's
// defaults (2 minutes, 2) take up to 6 minutes, during which a role waits
// on a connection that will never answer.
const (
	PingInterval        = 5 * time.Second
	MaxPingsOutstanding = 2
)

// Connect dials NATS as role ("ingress", "processor", "replayer", "admin")
// with the identity and TLS of c, with reconnects forever: a NATS restart
// or a partition must not kill a role, it must pause it. bufferOnReconnect false disables
// the client's reconnect buffer so that ingress fails a publish at once (503,
// the provider retries) instead of answering after a buffered write it
// cannot confirm.
func Connect(c config.NATS, role string, bufferOnReconnect bool, log *slog.Logger) (*nats.Conn, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	auth, err := Options(c, role)
	if err != nil {
		return nil, err
	}
	opts := append(auth,
		nats.Name("intake-"+role),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.PingInterval(PingInterval),
		nats.MaxPingsOutstanding(MaxPingsOutstanding),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", config.Redact(nc.ConnectedUrl()))
		}),
		nats.ErrorHandler(asyncErrors(role, log)),
	)
	if !bufferOnReconnect {
		opts = append(opts, nats.ReconnectBufSize(-1))
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats connect %s as %s: %w", config.Redact(c.URL), role, err)
	}
	return nc, nil
}

// Options are the client options for c's identity, TLS and role's inbox
// prefix (InboxPrefix + "_" + role). Tools that dial NATS themselves (the
// harnesses) use them to connect as Intake does.
func Options(c config.NATS, role string) ([]nats.Option, error) {
	prefix := c.InboxPrefix
	if prefix == "" {
		prefix = config.DefaultInboxPrefix
	}
	opts := []nats.Option{nats.CustomInboxPrefix(InboxPrefix(prefix, role))}
	switch {
	case c.Credentials != "":
		opts = append(opts, nats.UserCredentials(c.Credentials))
	case c.NkeySeed != "":
		o, err := nats.NkeyOptionFromSeed(c.NkeySeed)
		if err != nil {
			return nil, fmt.Errorf("nats.nkey_seed: %w", err)
		}
		opts = append(opts, o)
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.TLS.CA != "" {
		opts = append(opts, nats.RootCAs(c.TLS.CA))
	}
	if c.TLS.Cert != "" {
		opts = append(opts, nats.ClientCert(c.TLS.Cert, c.TLS.Key))
	}
	return opts, nil
}

// InboxPrefix is the inbox prefix role dials with: "_INBOX_intake_ingress"
// for the default prefix. deploy/nats/intake.conf allows each role to
// subscribe to "<that>.>" only.
func InboxPrefix(prefix, role string) string { return prefix + "_" + role }

// asyncErrors logs what the server reports outside a request: above all a
// permissions violation, which otherwise shows only as a request timing out
// (the server drops a refused publish and tells the client on the side).
func asyncErrors(role string, log *slog.Logger) nats.ErrHandler {
	return func(_ *nats.Conn, sub *nats.Subscription, err error) {
		attrs := []any{"nats_user_role", role, "err", err}
		if sub != nil {
			attrs = append(attrs, "subject", sub.Subject)
		}
		if errors.Is(err, nats.ErrPermissionViolation) {
			log.Error("nats refused a request: this role's NATS user lacks a permission (see deploy/nats/intake.conf)", attrs...)
			return
		}
		if errors.Is(err, nats.ErrSlowConsumer) {
			log.Warn("nats slow consumer", attrs...)
			return
		}
		log.Error("nats async error", attrs...)
	}
}
