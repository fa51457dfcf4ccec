package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
)

func newIngressCmd(g *globals) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "ingress",
		Short: "Receive webhooks: verify, publish to INTAKE_IN, answer after the PubAck",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := g.loadConfig(false, intake.Roles{Ingress: true}.Secrets())
			if err != nil {
				return err
			}
			if err := refusePublishedSecrets(cfg); err != nil {
				return err
			}
			if addr == "" {
				addr = cfg.Ingress.Addr
			}
			log := g.logger()
			setGCPercent(ingressGCPercent)
			log.Info("ingress starting", "addr", addr, "integrations", len(cfg.Integrations))
			return runTraced(cmd.Context(), "ingress", log, func(tp trace.TracerProvider) error {
				return intake.Run(cmd.Context(), cfg, intake.Options{Roles: intake.Roles{Ingress: true}, HTTPAddr: addr, Log: log, TracerProvider: tp})
			})
		},
	}
	cmd.Flags().StringVar(&addr, "http-addr", "", fmt.Sprintf("listen address (default: ingress.addr, %q)", config.DefaultIngressAddr))
	return cmd
}

// The roles' garbage-collection targets when GOGC is not set (see
// BENCHMARKS.md). Their live heaps are small and they allocate per message,
// so at Go's default (100) the collector runs often for little garbage.
const (
	processorGCPercent  = 400
	ingressGCPercent    = 400
	dispatcherGCPercent = 400
)

// setGCPercent sets the collector's target unless GOGC is in the
// environment (which wins).
func setGCPercent(p int) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(p)
	}
}

func newProcessorCmd(g *globals) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "processor",
		Short: "Consume INTAKE_IN: inbox claim + domain change in one transaction; relay the outbox",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := g.loadConfig(false, intake.Roles{Processor: true}.Secrets())
			if err != nil {
				return err
			}
			if err := refusePublishedSecrets(cfg); err != nil {
				return err
			}
			log := g.logger()
			setGCPercent(processorGCPercent)
			log.Info("processor starting", "metrics_addr", addr)
			return runTraced(cmd.Context(), "processor", log, func(tp trace.TracerProvider) error {
				return intake.Run(cmd.Context(), cfg, intake.Options{Roles: intake.Roles{Processor: true}, HTTPAddr: addr, Log: log, TracerProvider: tp})
			})
		},
	}
	cmd.Flags().StringVar(&addr, "http-addr", config.DefaultProcessorHTTPAddr, "listen address for /healthz, /readyz and /metrics (unless http.internal_addr moves /metrics there)")
	return cmd
}

func newMigrateCmd(g *globals) *cobra.Command {
	var streamsOnly, noStreams bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations embedded in this binary, then create or update the streams (safe to run concurrently)",
		Long: `Apply the database migrations embedded in this binary (safe to run concurrently), then
connect to NATS with the config's identity — the admin user, the one allowed to create
streams — and create or update INTAKE_IN, INTAKE_OUT and INTAKE_RECEIPTS. The roles only
check that the streams exist as configured, and refuse to start until this has run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if streamsOnly && noStreams {
				return fmt.Errorf("--streams-only and --no-streams exclude each other")
			}
			cfg, _, err := g.loadConfig(false, config.NoSecrets)
			if err != nil {
				return err
			}
			if err := refusePublishedSecrets(cfg); err != nil {
				return err
			}
			if !noStreams && cfg.NATS.URL == "" {
				return fmt.Errorf("nats.url (or INTAKE_NATS_URL) is required to create the streams (or --no-streams)")
			}
			if !streamsOnly {
				if cfg.Postgres.URL == "" {
					return fmt.Errorf("postgres.url (or DATABASE_URL) is required (or --streams-only)")
				}
				if err := store.Migrate(cmd.Context(), cfg.Postgres.URL, g.logger()); err != nil {
					return err
				}
				fmt.Println("migrations applied")
			}
			if noStreams {
				return nil
			}
			if err := stream.Setup(cmd.Context(), cfg.NATS, g.logger()); err != nil {
				return fmt.Errorf("streams: %w", err)
			}
			fmt.Println("streams ready")
			return nil
		},
	}
	cmd.Flags().BoolVar(&streamsOnly, "streams-only", false, "only create or update the NATS streams")
	cmd.Flags().BoolVar(&noStreams, "no-streams", false, "only apply the database migrations")
	return cmd
}
