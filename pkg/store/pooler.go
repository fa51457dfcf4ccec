package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrTransactionPooler is wrapped by Migrate's error when its url leads
// through a pooler that hands server connections out per transaction
// (PgBouncer's pool_mode=transaction): Migrate's session advisory lock would
// be taken on one server connection and released, or not, on another.
var ErrTransactionPooler = errors.New("postgres.url leads through a transaction-mode pooler " +
	"(PgBouncer pool_mode=transaction): session advisory locks do not hold there")

// PoolerRecipe is what to do about a transaction-mode pooler in front of a
// role that needs sessions; the refusal and the warning quote it.
const PoolerRecipe = "point `intake migrate` and the replayer role at Postgres directly (or at a " +
	"pool_mode=session pool); the processor and ingress may stay behind the pooler, with " +
	"default_query_exec_mode=cache_describe in postgres.url below PgBouncer 1.21 (docs/scaling.md, Behind PgBouncer)"

// TransactionPooled reports whether the pool's url leads through a
// transaction-mode pooler (see transactionPooled). It opens two
// connections of its own, whatever the pool's size.
func (s *Store) TransactionPooled(ctx context.Context) (bool, error) {
	return probePooler(ctx, s.pool.Config().ConnConfig)
}

func probePooler(ctx context.Context, cc *pgx.ConnConfig) (bool, error) {
	a, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		return false, err
	}
	defer a.Close(context.WithoutCancel(ctx))
	b, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		return false, err
	}
	defer b.Close(context.WithoutCancel(ctx))
	return transactionPooled(ctx, a, b)
}

// transactionPooled tells a pooler that hands out a server connection per
// transaction from a direct (or session-pooled) connection by the backend
// pids two client connections see. Directly, a client connection is one
// backend for its life, and two are two. Behind transaction pooling, a's
// backend is free again once its statement ends, so b's transaction gets
// it (PgBouncer reuses the most recent idle server first), and a's next
// statement, while b holds it, gets another. No pooler shows neither.
func transactionPooled(ctx context.Context, a, b *pgx.Conn) (bool, error) {
	const pid = `SELECT pg_backend_pid()`
	// Whatever mode the url names: pgx's default would prepare the probe
	// on one server connection and meet its name again on another.
	simple := pgx.QueryExecModeSimpleProtocol
	var pidA, pidB, pidA2 int32
	if err := a.QueryRow(ctx, pid, simple).Scan(&pidA); err != nil {
		return false, fmt.Errorf("store: pooler probe: %w", err)
	}
	tx, err := b.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("store: pooler probe: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := tx.QueryRow(ctx, pid, simple).Scan(&pidB); err != nil {
		return false, fmt.Errorf("store: pooler probe: %w", err)
	}
	if err := a.QueryRow(ctx, pid, simple).Scan(&pidA2); err != nil {
		return false, fmt.Errorf("store: pooler probe: %w", err)
	}
	return pidB == pidA || pidA2 != pidA, nil
}
