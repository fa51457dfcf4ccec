package intake

import (
	"context"

	"github.com/intakehq/intake/pkg/config"
)

// warnConnectionBudget logs, once at start, when this process's pool (or,
// for a processor, processor.replicas pools like it) may need more
// connections than the Postgres server has: the pool would not fail now,
// but later, under load, with "too many clients". Not being able to read
// the budget is only logged.
func (a *App) warnConnectionBudget(ctx context.Context, cfg *config.Config) {
	b, err := a.st.ReadConnectionBudget(ctx)
	if err != nil {
		a.log.Warn("cannot read the postgres connection budget", "err", err)
		return
	}
	replicas := 1
	if a.o.Roles.Processor {
		replicas = cfg.Processor.Replicas
	}
	own := int(a.st.Pool().Stat().TotalConns())
	for _, s := range b.Shortfalls(int(cfg.Postgres.MaxConns), own, replicas) {
		a.log.Warn("postgres connection budget: " + s)
	}
}
