package main

import (
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/internal/harness/dev"
	"github.com/intakehq/intake/pkg/config"
)

// defaultAPI is where the operator CLI and `intake send` look without
// --server/--url: `intake dev`'s one listener.
const defaultAPI = "http://" + dev.DefaultHTTPAddr

func newDevCmd(g *globals) *cobra.Command {
	var o dev.Options
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything in one process: embedded NATS, Postgres, ingress, processor, relay, API",
		Long: `dev runs the whole pipeline on one machine. NATS is embedded (unless nats.url or
INTAKE_NATS_URL is set); Postgres is DATABASE_URL (or postgres.url), else a private
cluster started from the PostgreSQL server binaries on PATH under --data-dir, on
127.0.0.1:--postgres-port. --init-sql files run after the migrations, before the
processor prepares the config's SQL handlers: their tables and functions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, path, err := g.loadConfig(true, config.AllSecrets)
			if err != nil {
				return err
			}
			log := g.logger()
			o.Log = log
			o.Ready = func(info dev.Info) { printDevBanner(cmd.OutOrStdout(), g.self(false), g.self(true), path, cfg, info) }
			return runTraced(cmd.Context(), "dev", log, func(tp trace.TracerProvider) error {
				o.TracerProvider = tp
				return dev.Run(cmd.Context(), cfg, o)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DataDir, "data-dir", dev.DefaultDataDir, "where the embedded NATS store and private Postgres live")
	f.StringVar(&o.HTTPAddr, "http-addr", dev.DefaultHTTPAddr, "one listener for webhooks, /api/v1, /metrics and health")
	f.StringVar(&o.NATSAddr, "nats-addr", dev.DefaultNATSAddr, "where the embedded NATS listens (for subscribers and the nats CLI)")
	f.IntVar(&o.PostgresPort, "postgres-port", dev.DefaultPostgresPort, "port of the private Postgres on 127.0.0.1 (psql postgres://postgres@127.0.0.1:PORT/intake)")
	f.StringArrayVar(&o.InitSQL, "init-sql", nil, "SQL file applied after migrations, before the roles start, at every start (a SQL handler's tables and functions); repeatable")
	return cmd
}
