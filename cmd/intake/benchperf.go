package main

import (
	"github.com/spf13/cobra"

	"github.com/intakehq/intake/internal/harness/bench"
)

// attachPerf makes `intake bench` (no subcommand) the performance harness
// and adds the hidden `bench bare-http` reference server it starts.
func attachPerf(cmd *cobra.Command, g *globals) {
	var (
		c      bench.Config
		output string
	)
	cmd.Long = `bench measures ingress, processor and end to end against limits measured in the
same run (bare HTTP, raw JetStream publish, the Postgres batched-insert limit, one
transaction per event) and prints figures and ratios, and Postgres's cost per event
(WAL, CPU, rows, index entries, bytes) while the processor drains. --quick finishes in
under a minute. --durability, --replication, --processors, --prefill and --system each run one comparison instead
(--system: the whole pipeline as intake dev deploys it, CPU per event, issue 35).
Subcommands run other harnesses.`
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c.Log = g.logger()
		rep, err := bench.Run(cmd.Context(), c)
		if rep != nil {
			if perr := rep.Print(cmd.OutOrStdout(), output == "json"); perr != nil && err == nil {
				err = perr
			}
		}
		return err
	}
	f := cmd.Flags()
	f.BoolVar(&c.Quick, "quick", false, "1 KiB payloads, 3s per stage: under a minute")
	f.DurationVar(&c.Duration, "duration", 0, "time per measurement (default 10s, 3s with --quick)")
	f.IntVar(&c.Connections, "connections", 64, "load generator connections")
	f.IntSliceVar(&c.Payloads, "payload", nil, "payload sizes in bytes (default 1024,16384; 1024 with --quick)")
	f.StringVarP(&output, "output", "o", "table", "table or json")
	f.BoolVar(&c.Durability, "durability", false, "only compare JetStream's per-write sync with its default, for ingress and raw publish")
	f.BoolVar(&c.Replication, "replication", false, "only compare the processor's Postgres writes with a synchronous and an asynchronous standby")
	f.IntSliceVar(&c.Processors, "processors", nil, "only drain the same backlog with each of these numbers of processor processes (e.g. 1,2,4): committed rate, shares, Postgres per event")
	f.IntVar(&c.Prefill, "prefill", 0, "only compare one processor on empty tables with one on tables already holding this many events' rows (e.g. 10000000, spread over 90 days), and the purge's rate")
	f.BoolVar(&c.System, "system", false, "only measure the whole pipeline as `intake dev` deploys it (default 20s of load): CPU per event of the system under test (postgres included, the generator not), against bare HTTP")
	f.StringVar(&c.ProfileDir, "profile-dir", "", "write CPU profiles of ingress and processor here (go tool pprof)")

	var addr string
	bare := &cobra.Command{
		Use:    "bare-http",
		Short:  "Reference server for `intake bench`: reads the body, answers 200",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.ServeBare(cmd.Context(), addr)
		},
	}
	bare.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "listen address")
	cmd.AddCommand(bare)
}
