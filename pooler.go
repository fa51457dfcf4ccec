package intake

import (
	"context"

	"github.com/intakehq/intake/pkg/store"
)

// warnTransactionPooler logs, once at the replayer's start, when
// postgres.url leads through a transaction-mode pooler: a replay's
// session advisory lock (store.LockReplay) is then taken on whatever server
// connection the pooler picked and its unlock may reach another, so the
// lock can stay held on a pooled connection (no replayer resumes the
// replay) or two replayers can publish one replay. Replays still run, so
// this warns rather than refuses; a failed probe is only logged.
func (a *App) warnTransactionPooler(ctx context.Context) {
	pooled, err := a.st.TransactionPooled(ctx)
	if err != nil {
		a.log.Warn("replayer: cannot tell whether postgres.url leads through a transaction-mode pooler", "err", err)
		return
	}
	if pooled {
		a.log.Warn("replayer: " + store.ErrTransactionPooler.Error() + ": a replay's lock may stay held on a pooled " +
			"server connection or be held twice; " + store.PoolerRecipe)
	}
}
