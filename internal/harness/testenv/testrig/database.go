package testrig

import (
	"context"
	"testing"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/store"
)

// migratedTemplate names the template database that holds Intake's schema.
const migratedTemplate = "intake-migrated"

// Database returns the URL of a fresh database with Intake's schema, private
// to this test and dropped when it ends. It is a copy of a template
// database that the first call in the test binary migrates.
func Database(t testing.TB) string {
	t.Helper()
	return testenv.PostgresFrom(t, migratedTemplate, func(ctx context.Context, url string) error {
		return store.Migrate(ctx, url, nil)
	})
}

// Migrate applies Intake's migrations to the database at url: for databases
// the template cannot serve, such as one on a test's private cluster.
func Migrate(t testing.TB, url string) {
	t.Helper()
	if err := store.Migrate(context.Background(), url, nil); err != nil {
		t.Fatalf("testrig: migrate: %v", err)
	}
}

// Store opens a store on url with at most maxConns connections (0: pgx's
// default) and closes it when the test ends.
func Store(t testing.TB, url string, maxConns int32) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), url, maxConns)
	if err != nil {
		t.Fatalf("testrig: open store: %v", err)
	}
	t.Cleanup(st.Close)
	return st
}
