package main

import "github.com/spf13/cobra"

// newBenchCmd is `intake bench`: the performance harness itself (benchperf.go)
// and, as subcommands, the other harnesses.
func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Intake against limits measured in the same run (and other harnesses)",
	}
	attachPerf(cmd, g)
	cmd.AddCommand(newChaosCmd(), newChaosProcessorCmd(g))
	return cmd
}
