package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/testenv"
	"github.com/intakehq/intake/pkg/store"
)

// Every pod may run `intake migrate` at start: six runs at once on an empty
// database all succeed (five rounds, each on a new database), and six more
// on the migrated one.
func TestConcurrentMigrate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	migrate := func(round, url string) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Go(func() { errs[i] = store.Migrate(ctx, url, nil) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s: run %d of %d: %v", round, i+1, len(errs), err)
			}
		}
		st, err := store.Open(ctx, url, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := store.CheckMigrated(ctx, st); err != nil {
			t.Fatalf("%s: %v", round, err)
		}
	}
	var url string
	for _, round := range []string{"round 1", "round 2", "round 3", "round 4", "round 5"} {
		url = testenv.Postgres(t)
		migrate(round+", empty database", url)
	}
	migrate("migrated database", url)
}
