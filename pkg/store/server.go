package store

import (
	"context"
	"fmt"
	"time"
)

// With asynchronous streaming replication, a commit the old primary
// acknowledged but never shipped is gone once the standby is promoted. The
// DSN keeps working (it finds the new primary), so nothing in Intake's
// queries says it happened: ServerWatcher notices by reading who answers.

// ServerIdentity says which Postgres server answers and since when. Any
// role may read it: system_identifier (pg_control_system) cannot tell a
// primary from its standby — they share it — so the address, port and
// postmaster start time do: a promoted standby is another server, and a
// restarted one has another start time.
type ServerIdentity struct {
	// Addr and Port are where the server accepts this connection
	// (inet_server_addr, inet_server_port); empty and 0 over a Unix socket.
	Addr string `json:"addr"`
	Port int    `json:"port"`
	// StartedAt is pg_postmaster_start_time(): it changes on a restart.
	StartedAt time.Time `json:"started_at"`
	// InRecovery is pg_is_in_recovery(): a standby (true) that turns false
	// was promoted.
	InRecovery bool `json:"in_recovery"`
}

// Same reports whether id and o describe the same server in the same role
// and run: false after a failover, a restart or a promotion.
func (id ServerIdentity) Same(o ServerIdentity) bool {
	return id.Addr == o.Addr && id.Port == o.Port && id.StartedAt.Equal(o.StartedAt) && id.InRecovery == o.InRecovery
}

func (id ServerIdentity) String() string {
	return fmt.Sprintf("%s:%d started %s recovery=%t", id.Addr, id.Port, id.StartedAt.UTC().Format(time.RFC3339Nano), id.InRecovery)
}

// ServerIdentity reads the identity of the server that answers the pool now.
func (s *Store) ServerIdentity(ctx context.Context) (ServerIdentity, error) {
	var id ServerIdentity
	var addr *string
	var port *int32
	err := s.pool.QueryRow(ctx, `SELECT host(inet_server_addr()), inet_server_port(), pg_postmaster_start_time(), pg_is_in_recovery()`).
		Scan(&addr, &port, &id.StartedAt, &id.InRecovery)
	if err != nil {
		return ServerIdentity{}, fmt.Errorf("store: server identity: %w", err)
	}
	if addr != nil {
		id.Addr = *addr
	}
	if port != nil {
		id.Port = int(*port)
	}
	return id, nil
}

// ServerChange is a change of the server behind the pool: Old answered
// before, New answers now.
type ServerChange struct {
	Old, New ServerIdentity
}

// DefaultServerWatchInterval is how often a ServerWatcher reads the
// identity unless told otherwise: one tiny query every few seconds.
const DefaultServerWatchInterval = 5 * time.Second

// ServerWatcher reads the server identity every Interval and calls OnChange
// when another server (or the same one restarted) answers. Reads that fail
// (the server is away) are skipped: the comparison is with the last
// identity read, so a failover is reported once the new primary answers.
type ServerWatcher struct {
	Store *Store // required
	// Interval between reads. Defaults to DefaultServerWatchInterval (5s).
	Interval time.Duration
	// OnChange is called from Run's goroutine; it should return quickly.
	OnChange func(ServerChange)
	// Baseline, when set, is the identity the first read is compared with
	// (one read when the caller started). Zero: the first read is the
	// baseline, and no change is reported for it.
	Baseline ServerIdentity
}

// Run watches until ctx ends.
func (w ServerWatcher) Run(ctx context.Context) {
	every := w.Interval
	if every <= 0 {
		every = DefaultServerWatchInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	last := w.Baseline
	known := !last.StartedAt.IsZero()
	for {
		rctx, cancel := context.WithTimeout(ctx, every)
		id, err := w.Store.ServerIdentity(rctx)
		cancel()
		if err == nil {
			if known && !id.Same(last) && w.OnChange != nil {
				w.OnChange(ServerChange{Old: last, New: id})
			}
			last, known = id, true
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
