package main

import (
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/pkg/config"
)

func newDispatcherCmd(g *globals) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "dispatcher",
		Short: "Push processed events from INTAKE_OUT to the config's HTTP destinations, signed and retried",
		Long: `dispatcher delivers every message of INTAKE_OUT that a destination of the config
matches: a POST of the payload signed as Standard Webhooks (webhook-id stable across
retries, replays and re-drives), retried on the destination's schedule, each attempt in
the delivery log (intake.dispatch_attempts). Each destination has a durable consumer of
its own; several dispatchers share them. See docs/destinations.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := g.loadConfig(false, intake.Roles{Dispatcher: true}.Secrets())
			if err != nil {
				return err
			}
			if err := refusePublishedSecrets(cfg); err != nil {
				return err
			}
			setGCPercent(dispatcherGCPercent)
			log := g.logger()
			log.Info("dispatcher starting", "metrics_addr", addr, "destinations", len(cfg.Destinations))
			return runTraced(cmd.Context(), "dispatcher", log, func(tp trace.TracerProvider) error {
				return intake.Run(cmd.Context(), cfg, intake.Options{Roles: intake.Roles{Dispatcher: true}, HTTPAddr: addr, Log: log, TracerProvider: tp})
			})
		},
	}
	cmd.Flags().StringVar(&addr, "http-addr", config.DefaultDispatcherHTTPAddr, "listen address for /healthz, /readyz and /metrics (unless http.internal_addr moves /metrics there)")
	return cmd
}
