package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/internal/harness/bench"
	"github.com/intakehq/intake/pkg/config"
)

// newBenchCmd is `intake bench`: the performance harness itself (benchperf.go)
// and, as subcommands, the other harnesses.
func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Intake against limits measured in the same run (and other harnesses)",
	}
	attachPerf(cmd, g)
	cmd.AddCommand(newChaosCmd(), newChaosProcessorCmd(g), newSoakCmd(g))
	return cmd
}

// newSoakCmd is `intake bench soak`: a fixed load for a long time
// (internal/harness/bench/soak.go).
func newSoakCmd(g *globals) *cobra.Command {
	var (
		c      bench.SoakConfig
		output string
	)
	d := bench.SoakConfig{}.WithDefaults()
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Hold a steady load for a long time; compare the last minutes with the first",
		Long: `soak starts a private Postgres, NATS, ingress and processor as
processes of this binary, saturates ingress briefly to measure its maximum, lets
the processor catch up, then offers --load of that maximum (or --rate) for
--duration with signed webhooks. Every interval (a minute; a tenth of a run
shorter than ten minutes) it prints a row: accepted rate (2xx answers received),
how far the load is behind its schedule (ingress answering slower than offered), failures, ingress
p50/p99, end-to-end p99 (2xx to the watcher's receipt from INTAKE_OUT, and
2xx to the time NATS stored it there) and events later than 30s, the
processor's rate, its lag (INTAKE_IN pending + ack pending) and the age of the
oldest unprocessed message, rows the relay published, the outbox pending list
and its age, both roles' RSS, outbox_pending's dead tuples and the hot tables'
sizes, the checkpoints Postgres began and the WAL it wrote, the WARN/ERROR
lines the roles logged so far, and the CPU each process used (ingress,
processor, NATS, Postgres, this process, and the machine's idle time, in
percent of one core). The closing line
compares the last five minutes with the first five (the last and first fifth
of a run under ten minutes): accepted and processed rates >= 0.9, end-to-end
p99 <= 1.5x, peak RSS <= 1.2x, no warnings, dead tuples bounded. Exits 1 when a
check fails. --duplicate-window sets the streams' nats.stream.duplicate_window
(NATS holds every id of the window in memory: docs/scaling.md). Needs the
PostgreSQL server binaries, and disk for the streams
and tables (about 50 GB for 30 minutes at 5,000/s of 1 KiB: the streams keep every message, the outbox keeps rows for 72h).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.Log = g.logger()
			c.Progress = cmd.ErrOrStderr()
			rep, err := bench.Soak(cmd.Context(), c)
			if rep != nil {
				if perr := rep.Print(cmd.OutOrStdout(), output == "json"); perr != nil && err == nil {
					err = perr
				}
			}
			if err != nil {
				return err
			}
			if !rep.Verdict.OK {
				return exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&c.Duration, "duration", d.Duration, "how long the load runs")
	f.Float64Var(&c.Load, "load", d.Load, "offered rate as a fraction of the ingress maximum measured at the start")
	f.Float64Var(&c.Rate, "rate", 0, "offered requests per second instead of --load (skips the saturation)")
	f.IntVar(&c.Payload, "payload", d.Payload, "payload size in bytes")
	f.DurationVar(&c.Interval, "interval", 0, fmt.Sprintf("time per reported row (default %s; a tenth of --duration under 10m)", bench.DefaultSoakInterval))
	f.IntVar(&c.Connections, "connections", d.Connections, "connections saturating ingress (the steady load opens 4x as many)")
	f.StringArrayVar(&c.PostgresSettings, "pg-setting", nil, "a server setting for the private Postgres, name=value (repeatable)")
	f.DurationVar(&c.DuplicateWindow, "duplicate-window", config.DefaultDuplicateWindow, "the streams' nats.stream.duplicate_window")
	f.BoolVar(&c.NATSSyncAlways, "nats-sync-always", false, "NATS fsyncs every write before its PubAck, as the chart and compose ship it (default: NATS's periodic sync)")
	f.StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}
