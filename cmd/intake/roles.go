package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/pkg/app"
	"github.com/intakehq/intake/pkg/chaos"
	"github.com/intakehq/intake/pkg/store"
)

func newDevCmd(g *globals) *cobra.Command {
	var o app.DevOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything in one process: embedded NATS, Postgres, ingress, processor, relay, API",
		Long: `dev runs the whole pipeline on one machine. NATS is embedded (unless nats.url or
INTAKE_NATS_URL is set); Postgres is DATABASE_URL (or postgres.url), else a private
cluster started from the PostgreSQL server binaries on PATH under --data-dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, path, err := g.loadConfig(true)
			if err != nil {
				return err
			}
			log := g.logger()
			o.Log = log
			o.Ready = func(info app.DevInfo) { printDevBanner(cmd.OutOrStdout(), path, cfg, info) }
			return app.RunDev(cmd.Context(), cfg, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DataDir, "data-dir", ".intake", "where the embedded NATS store and private Postgres live")
	f.StringVar(&o.HTTPAddr, "http-addr", "127.0.0.1:8080", "one listener for webhooks, /api/v1, /metrics and health")
	f.StringVar(&o.NATSAddr, "nats-addr", "127.0.0.1:4222", "where the embedded NATS listens (for subscribers and the nats CLI)")
	return cmd
}

func newIngressCmd(g *globals) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "ingress",
		Short: "Receive webhooks: verify, publish to INTAKE_IN, answer after the PubAck",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := g.loadConfig(false)
			if err != nil {
				return err
			}
			if addr == "" {
				addr = cfg.Ingress.Addr
			}
			log := g.logger()
			setGCPercent(ingressGCPercent)
			log.Info("ingress starting", "addr", addr, "integrations", len(cfg.Integrations))
			return app.Run(cmd.Context(), cfg, app.Options{Roles: app.Roles{Ingress: true}, HTTPAddr: addr, Log: log})
		},
	}
	cmd.Flags().StringVar(&addr, "http-addr", "", "listen address (default: ingress.addr, \":8080\")")
	return cmd
}

// The roles' garbage-collection targets when GOGC is not set (see
// BENCHMARKS.md). Their live heaps are small and they allocate per message:
// at Go's default (100) the collector took an eighth of the processor's CPU.
const (
	processorGCPercent = 400
	ingressGCPercent   = 400
)

// setGCPercent sets the collector's target unless GOGC is in the
// environment (which wins).
func setGCPercent(p int) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(p)
	}
}

func newProcessorCmd(g *globals) *cobra.Command {
	var (
		addr          string
		handler       string
		crashOnSignal bool
	)
	cmd := &cobra.Command{
		Use:   "processor",
		Short: "Consume INTAKE_IN: inbox claim + domain change in one transaction; relay the outbox",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := g.loadConfig(false)
			if err != nil {
				return err
			}
			log := g.logger()
			o := app.Options{Roles: app.Roles{Processor: true}, HTTPAddr: addr, Log: log}
			switch handler {
			case "forward":
			case "effects": // the chaos harness's domain handler (pkg/chaos)
				o.Handler = chaos.Effects()
			case "effects-outside-tx": // its negative control
				h, closeDB, err := chaos.EffectsOutsideTx(cmd.Context(), cfg.Postgres.URL)
				if err != nil {
					return err
				}
				defer closeDB()
				o.Handler = h
			default:
				return fmt.Errorf("--handler: unknown %q (forward, effects or effects-outside-tx)", handler)
			}
			if crashOnSignal {
				o.AfterCommit = chaos.CrashAfterCommitOnSignal(cmd.Context())
			}
			setGCPercent(processorGCPercent)
			log.Info("processor starting", "metrics_addr", addr)
			return app.Run(cmd.Context(), cfg, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "http-addr", ":9090", "listen address for /metrics, /healthz, /readyz")
	// Hidden: for the chaos harness (intake bench chaos), not for production.
	f.StringVar(&handler, "handler", "forward", "domain handler: forward; effects (chaos harness: one row per applied event in chaos.effects); effects-outside-tx (its negative control)")
	f.BoolVar(&crashOnSignal, "crash-on-signal", false, "fault injection: on SIGUSR1, die with SIGKILL after the next commit, before its acks")
	_ = f.MarkHidden("handler")
	_ = f.MarkHidden("crash-on-signal")
	return cmd
}

func newMigrateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations embedded in this binary (safe to run concurrently)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := g.loadConfig(false)
			if err != nil {
				return err
			}
			if cfg.Postgres.URL == "" {
				return fmt.Errorf("postgres.url (or DATABASE_URL) is required")
			}
			if err := store.Migrate(cmd.Context(), cfg.Postgres.URL, g.logger()); err != nil {
				return err
			}
			fmt.Println("migrations applied")
			return nil
		},
	}
}
