package stream

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/config"
)

// AdminRole is the NATS role `intake migrate` dials as: the one identity
// allowed to create and update the streams (user "admin" in
// deploy/nats/intake.conf).
const AdminRole = "admin"

// SetupTimeout bounds Setup: waiting for JetStream and the three requests.
const SetupTimeout = time.Minute

// Setup connects with c's identity as AdminRole, waits for JetStream and
// creates or updates the streams (Ensure). `intake migrate` and `intake
// dev` run it; the roles only Check.
func Setup(ctx context.Context, c config.NATS, log *slog.Logger) error {
	nc, err := Connect(c, AdminRole, true, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, SetupTimeout)
	defer cancel()
	if err := WaitReady(ctx, js); err != nil {
		return err
	}
	if err := CheckServerVersion(nc.ConnectedServerVersion()); err != nil {
		return err
	}
	return Ensure(ctx, js, c.Stream)
}
