package main

import (
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/pkg/config"
)

func newReplayerCmd(g *globals) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "replayer",
		Short: "Serve the operator API (/api/v1) and publish replays and redeliveries",
		Long: `replayer serves the operator API — events, conflicts, replays, redeliveries,
reconcile — behind the bearer tokens of api.tokens, and publishes the replays it is
asked for. Several replayers may run: a replay is published by one at a time (a
Postgres advisory lock), and one whose replayer stopped is resumed by another.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := g.loadConfig(false, intake.Roles{Replayer: true}.Secrets())
			if err != nil {
				return err
			}
			if err := refusePublishedSecrets(cfg); err != nil {
				return err
			}
			log := g.logger()
			log.Info("replayer starting", "addr", addr)
			return runTraced(cmd.Context(), "replayer", log, func(tp trace.TracerProvider) error {
				return intake.Run(cmd.Context(), cfg, intake.Options{Roles: intake.Roles{Replayer: true}, HTTPAddr: addr, Log: log, TracerProvider: tp})
			})
		},
	}
	cmd.Flags().StringVar(&addr, "http-addr", config.DefaultReplayerHTTPAddr, "listen address for /api/v1, /healthz, /readyz and /metrics (unless http.internal_addr moves /metrics there)")
	return cmd
}
