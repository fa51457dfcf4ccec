// Package dev runs every role in one process for a laptop (`intake dev`): an
// embedded NATS and, unless DATABASE_URL is given, a private Postgres cluster
// started from the server binaries on PATH. It is local infrastructure, not a
// production role, so it lives outside the public packages.
package dev

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/natsserver"
	"github.com/intakehq/intake/internal/harness/pgcluster"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
)

// Options configure Run.
type Options struct {
	// Options are the roles' options; HTTPAddr, the one listener for
	// webhooks, /api/v1, /metrics and health, defaults to DefaultHTTPAddr
	// (127.0.0.1:8080).
	intake.Options
	// DataDir holds the embedded NATS store and the private Postgres cluster.
	// Defaults to DefaultDataDir (./.intake).
	DataDir string
	// NATSAddr is where the embedded NATS listens. Defaults to
	// DefaultNATSAddr (127.0.0.1:4222).
	NATSAddr string
	// PostgresPort is the private cluster's port on 127.0.0.1, so that
	// psql reaches it at a known URL. Defaults to DefaultPostgresPort.
	PostgresPort int
	// InitSQL are SQL files applied, in order, to the database after
	// Intake's migrations and before the roles start: a SQL handler's
	// tables and functions (handlers: is prepared at the processor's
	// start). Applied at every start: write them idempotently.
	InitSQL []string
	// Ready is called once everything serves.
	Ready func(Info)
}

// Defaults of Options; `intake dev`'s flags show the same values.
const (
	DefaultDataDir  = ".intake"
	DefaultNATSAddr = natsserver.DefaultAddr
	DefaultHTTPAddr = "127.0.0.1:8080"
	// DefaultPostgresPort is off Postgres's own 5432, which a system
	// server may hold.
	DefaultPostgresPort = 54320
)

// WithDefaults returns o with every unset field at its default.
func (o Options) WithDefaults() Options {
	if o.DataDir == "" {
		o.DataDir = DefaultDataDir
	}
	if o.NATSAddr == "" {
		o.NATSAddr = DefaultNATSAddr
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = DefaultHTTPAddr
	}
	if o.PostgresPort == 0 {
		o.PostgresPort = DefaultPostgresPort
	}
	return o
}

// Validate checks o; errors name the flag each field comes from.
func (o Options) Validate() error {
	var errs []error
	for _, a := range []struct{ flag, addr string }{{"--nats-addr", o.NATSAddr}, {"--http-addr", o.HTTPAddr}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("dev: %s %q: want host:port: %w", a.flag, a.addr, err))
		}
	}
	if o.PostgresPort < 0 || o.PostgresPort > 65535 {
		errs = append(errs, fmt.Errorf("dev: --postgres-port %d: out of range", o.PostgresPort))
	}
	return errors.Join(errs...)
}

// Info tells the user where things are.
type Info struct {
	HTTPURL     string
	NATSURL     string
	NATSEmbed   bool
	DatabaseURL string
	PGPrivate   bool
	DataDir     string
}

// Run runs every role in one process with an embedded NATS (unless
// nats.url / INTAKE_NATS_URL is set) and a private Postgres cluster (unless
// postgres.url / DATABASE_URL is set), applies migrations, and serves until
// ctx ends.
//
// Unset fields of o and cfg get their defaults (Options.WithDefaults,
// config.Config.WithDefaults) and both are validated before anything starts.
func Run(ctx context.Context, cfg *config.Config, o Options) error {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return err
	}
	*cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	info := Info{DataDir: dataDir}

	if cfg.NATS.URL == "" {
		emb, err := natsserver.Run(natsserver.Config{
			Addr:       o.NATSAddr,
			StoreDir:   filepath.Join(dataDir, "nats"),
			SyncAlways: cfg.NATS.SyncAlways,
		})
		if err != nil {
			return fmt.Errorf("%w (use --nats-addr to pick another address, or set INTAKE_NATS_URL to use a running server)", err)
		}
		defer emb.Shutdown()
		cfg.NATS.URL = emb.ClientURL()
		info.NATSEmbed = true
	}
	info.NATSURL = cfg.NATS.URL

	if cfg.Postgres.URL == "" {
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dataDir, "postgres"), Port: o.PostgresPort, Logger: o.Log})
		if err != nil {
			if errors.Is(err, pgcluster.ErrNoBinaries) {
				return fmt.Errorf("no Postgres: set DATABASE_URL (or postgres.url) to a database, or put the PostgreSQL server binaries (initdb, pg_ctl, postgres) on PATH: %w", err)
			}
			if errors.Is(err, pgcluster.ErrPortInUse) {
				return fmt.Errorf("%w (use --postgres-port to pick another port)", err)
			}
			return err
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = c.Stop(stopCtx)
		}()
		if err := createDatabase(ctx, c.URL("postgres"), "intake"); err != nil {
			return err
		}
		cfg.Postgres.URL = c.URL("intake")
		info.PGPrivate = true
	}
	info.DatabaseURL = cfg.Postgres.URL
	o.Middleware = append(o.Middleware, DemoFailures()) // demo.fail, demo.quarantine, demo.flaky

	if err := store.Migrate(ctx, cfg.Postgres.URL, o.Log); err != nil {
		return err
	}
	if err := applySQL(ctx, cfg.Postgres.URL, o.InitSQL); err != nil {
		return err
	}
	// As `intake migrate` does: the roles only check the streams.
	if err := stream.Setup(ctx, cfg.NATS, o.Log); err != nil {
		return err
	}

	o.Roles = intake.Roles{Ingress: true, Processor: true, Replayer: true, Dispatcher: true}
	listening := o.Listening
	o.Listening = func(addr net.Addr) {
		info.HTTPURL = "http://" + addr.String()
		if listening != nil {
			listening(addr)
		}
		if o.Ready != nil {
			o.Ready(info)
		}
	}
	return intake.Run(ctx, cfg, o.Options)
}

// applySQL runs each file, whole, on the database at url.
func applySQL(ctx context.Context, url string, files []string) error {
	if len(files) == 0 {
		return nil
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, f := range files {
		sql, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("--init-sql: %w", err)
		}
		// Simple protocol: a file of several statements is one Exec.
		if _, err := conn.Exec(ctx, string(sql), pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("--init-sql %s: %w", f, err)
		}
	}
	return nil
}

// createDatabase creates name unless it exists.
func createDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("postgres: create database %s: %w", name, err)
	}
	return nil
}
