package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/pkg/app"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
)

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
			if err := refusePublishedSecrets(cfg); err != nil {
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
	cmd.Flags().StringVar(&addr, "http-addr", "", fmt.Sprintf("listen address (default: ingress.addr, %q)", config.DefaultIngressAddr))
	return cmd
}

// The roles' garbage-collection targets when GOGC is not set (see
// BENCHMARKS.md). Their live heaps are small and they allocate per message,
// so at Go's default (100) the collector runs often for little garbage.
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

// defaultProcessorHTTPAddr is `intake processor --http-addr` when unset.
const defaultProcessorHTTPAddr = ":9090"

func newProcessorCmd(g *globals) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "processor",
		Short: "Consume INTAKE_IN: inbox claim + domain change in one transaction; relay the outbox",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := g.loadConfig(false)
			if err != nil {
				return err
			}
			if err := refusePublishedSecrets(cfg); err != nil {
				return err
			}
			log := g.logger()
			setGCPercent(processorGCPercent)
			log.Info("processor starting", "metrics_addr", addr)
			return app.Run(cmd.Context(), cfg, app.Options{Roles: app.Roles{Processor: true}, HTTPAddr: addr, Log: log})
		},
	}
	cmd.Flags().StringVar(&addr, "http-addr", defaultProcessorHTTPAddr, "listen address for /healthz, /readyz and /metrics (unless http.internal_addr moves /metrics there)")
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
			if err := refusePublishedSecrets(cfg); err != nil {
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
