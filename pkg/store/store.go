package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Schema holds every Intake table.
const Schema = "intake"

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("store: not found")

//go:embed migrations/*.sql
var migrations embed.FS

// Store wraps the pool. Methods that must join the caller's transaction take
// a pgx.Tx instead.
type Store struct {
	pool *pgxpool.Pool
}

// Open connects a pool to url and checks the connection.
func Open(ctx context.Context, url string, maxConns int32) (*Store, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: postgres url: %w", err)
	}
	if maxConns > 0 {
		pc.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: connect %s: %w", redact(pc.ConnConfig), err)
	}
	return &Store{pool: pool}, nil
}

// Pool is the underlying pool for callers that run their own transactions.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks the database answers (readiness).
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Migrate applies the embedded migrations with goose. A Postgres advisory
// lock serialises concurrent runs, so every pod may call it at start.
func Migrate(ctx context.Context, url string, log *slog.Logger) error {
	pc, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("store: postgres url: %w", err)
	}
	db := stdlib.OpenDB(*pc)
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+Schema); err != nil {
		return fmt.Errorf("store: create schema: %w", err)
	}
	p, err := newMigrator(db, log)
	if err != nil {
		return err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	if log != nil {
		for _, r := range results {
			log.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "took", r.Duration)
		}
	}
	return nil
}

func newMigrator(db *sql.DB, log *slog.Logger) (*goose.Provider, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, err
	}
	opts := []goose.ProviderOption{
		goose.WithTableName(Schema + ".schema_migrations"),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	}
	if log != nil {
		opts = append(opts, goose.WithSlog(log))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, opts...)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	return p, nil
}

func redact(c *pgx.ConnConfig) string {
	return fmt.Sprintf("postgres://%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// ErrNotMigrated says the schema is missing or behind this binary.
var ErrNotMigrated = errors.New("store: database schema is not migrated; run `intake migrate`")

// CheckMigrated fails with ErrNotMigrated unless every embedded migration
// has been applied.
func CheckMigrated(ctx context.Context, s *Store) error {
	want, err := latestVersion()
	if err != nil {
		return err
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('intake.schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("store: check migrations: %w", err)
	}
	if !exists {
		return ErrNotMigrated
	}
	var have *int64
	err = s.pool.QueryRow(ctx, `SELECT max(version_id) FROM intake.schema_migrations WHERE is_applied`).Scan(&have)
	if err != nil {
		return fmt.Errorf("store: check migrations: %w", err)
	}
	if have == nil || *have < want {
		return ErrNotMigrated
	}
	return nil
}

func latestVersion() (int64, error) {
	entries, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, e := range entries {
		var v int64
		if _, err := fmt.Sscanf(e[len("migrations/"):], "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest, nil
}
