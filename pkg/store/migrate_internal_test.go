package store

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/intakehq/intake/internal/testenv"
)

// Every migration's Down undoes its Up: down to nothing and up again.
func TestMigrationsGoDownAndUpAgain(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.Postgres(t)
	if err := Migrate(ctx, dbURL, nil); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := newMigrator(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("down: %v", err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
