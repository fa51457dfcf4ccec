package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/internal/harness/testenv"
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

// A session that holds the migration lock (a run that never ended, or a
// lock leaked behind a transaction-mode pooler) makes Migrate give up with
// ErrMigrateLocked, naming the holder's pid, once its ctx ends, instead of
// waiting forever; once the session is gone, Migrate runs.
func TestMigrateGivesUpOnAHeldLock(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := testenv.Postgres(t)
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	var pid int32
	if err := holder.QueryRow(ctx, `SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock(hashtextextended('intake.migrate', 0))) AS locked`).
		Scan(&pid); err != nil {
		t.Fatal(err)
	}

	short, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	err = store.Migrate(short, url, nil)
	if !errors.Is(err, store.ErrMigrateLocked) || !strings.Contains(err.Error(), fmt.Sprintf("held by pid %d", pid)) {
		t.Fatalf("Migrate with the lock held = %v, want ErrMigrateLocked naming pid %d", err, pid)
	}
	t.Log(err)

	if err := holder.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, url, nil); err != nil {
		t.Fatalf("Migrate once the holder is gone: %v", err)
	}
}
