package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/store"
)

// TestTransactionPoolerIsDetected: through Debian's pgbouncer in
// transaction mode the probe says pooled and `intake migrate` refuses with
// the recipe; directly and through a session-mode pgbouncer it says not,
// and the migration runs.
func TestTransactionPoolerIsDetected(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		via    func(t *testing.T, url string) string
		pooled bool
	}{
		{"direct", func(_ *testing.T, url string) string { return url }, false},
		{"pgbouncer session", func(t *testing.T, url string) string {
			return testenv.StartPgBouncer(t, "session").Via(t, url)
		}, false},
		{"pgbouncer transaction", func(t *testing.T, url string) string {
			return testenv.StartPgBouncer(t, "transaction").Via(t, url)
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			url := tt.via(t, testenv.Postgres(t))
			// Several rounds: the verdict must not depend on which idle
			// server connection the pooler hands out.
			st, err := store.Open(ctx, url, 4)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for round := range 5 {
				pooled, err := st.TransactionPooled(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if pooled != tt.pooled {
					t.Fatalf("round %d: TransactionPooled = %v, want %v", round, pooled, tt.pooled)
				}
			}
			err = store.Migrate(ctx, url, nil)
			switch {
			case tt.pooled && !errors.Is(err, store.ErrTransactionPooler):
				t.Fatalf("Migrate through the pooler = %v, want ErrTransactionPooler", err)
			case tt.pooled && !strings.Contains(err.Error(), store.PoolerRecipe):
				t.Fatalf("Migrate's refusal %q does not give the recipe", err)
			case !tt.pooled && err != nil:
				t.Fatalf("Migrate = %v", err)
			}
		})
	}
}
