package store

import (
	"context"
	"fmt"
)

// ConnectionBudget is what a Postgres server allows ordinary roles and what
// they use: every replica's pool draws on the same max_connections.
type ConnectionBudget struct {
	MaxConnections int // max_connections
	// Reserved are the slots only superusers (superuser_reserved_connections)
	// and, from Postgres 16, pg_use_reserved_connections members
	// (reserved_connections) may take.
	Reserved int
	// InUse counts client connections open now, this process's included.
	InUse int
}

// Available is the most connections ordinary roles may have in all.
func (b ConnectionBudget) Available() int { return b.MaxConnections - b.Reserved }

// Left is how many more connections ordinary roles may open now.
func (b ConnectionBudget) Left() int { return b.Available() - b.InUse }

// Shortfalls lists how a pool of maxConns, of which own are open now (and
// counted in InUse), may not fit: more than what is left on the server, or,
// with replicas processes alike, more than the server allows at all. Each
// names the config key to change. None: it fits.
func (b ConnectionBudget) Shortfalls(maxConns, own, replicas int) []string {
	var out []string
	if room := b.Left() + own; maxConns > room {
		out = append(out, fmt.Sprintf("postgres.max_conns (%d) is more than the %d connections left on the server "+
			"(max_connections %d, %d reserved, %d in use): when the pool grows, Postgres will refuse it", maxConns, room, b.MaxConnections, b.Reserved, b.InUse))
	}
	if replicas > 1 && replicas*maxConns > b.Available() {
		out = append(out, fmt.Sprintf("processor.replicas × postgres.max_conns (%d × %d = %d) is more than the server's max_connections "+
			"less its reserved slots (%d): lower postgres.max_conns, raise max_connections, or put a pooler in front (docs/scaling.md)",
			replicas, maxConns, replicas*maxConns, b.Available()))
	}
	return out
}

// ReadConnectionBudget reads the server's connection limits and the client
// connections open now. Any role may: pg_stat_activity hides the backend
// type of other users' sessions from a role without pg_read_all_stats, so
// a hidden one in a database counts as a client (an autovacuum worker may
// be counted too: the budget errs on the short side).
func (s *Store) ReadConnectionBudget(ctx context.Context) (ConnectionBudget, error) {
	var b ConnectionBudget
	err := s.pool.QueryRow(ctx, `SELECT current_setting('max_connections')::int,
		current_setting('superuser_reserved_connections')::int + coalesce(current_setting('reserved_connections', true)::int, 0),
		(SELECT count(*) FROM pg_stat_activity
			WHERE backend_type = 'client backend' OR (backend_type IS NULL AND datid IS NOT NULL))::int`).
		Scan(&b.MaxConnections, &b.Reserved, &b.InUse)
	if err != nil {
		return ConnectionBudget{}, fmt.Errorf("store: connection budget: %w", err)
	}
	return b, nil
}
