package dispatcher_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/store"
)

func TestZZSize(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	ctx := context.Background()
	size := func() (tbl, idx int64) {
		r.DB.QueryRow(ctx, `VACUUM intake.dispatch_attempts`)
		_, _ = r.DB.Exec(ctx, `VACUUM ANALYZE intake.dispatch_attempts`)
		_ = r.DB.QueryRow(ctx, `SELECT pg_table_size('intake.dispatch_attempts'), pg_indexes_size('intake.dispatch_attempts')`).Scan(&tbl, &idx)
		return
	}
	t0, i0 := size()
	const n = 20000
	for b := 0; b < n/500; b++ {
		rows := make([]store.DispatchAttempt, 500)
		for i := range rows {
			k := fmt.Sprintf("stripe-demo/acct_1/evt_%d_%d", b, i)
			rows[i] = store.DispatchAttempt{Destination: "billing", MsgID: uuid.NewString(), Key: k, Integration: "stripe-demo", Tenant: "acme",
				EventType: "invoice.paid", StreamSeq: uint64(b*500 + i), Attempt: 1, Outcome: "delivered", StatusCode: 204, Latency: 12 * time.Millisecond,
				Response: "", AttemptedAt: time.Now()}
		}
		if err := r.Store.RecordDispatchAttempts(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	t1, i1 := size()
	fmt.Printf("per attempt: table %d B, indexes %d B\n", (t1-t0)/n, (i1-i0)/n)
}
