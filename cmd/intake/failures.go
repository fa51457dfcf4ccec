package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/internal/cut"
	"github.com/intakehq/intake/replayer/apiclient"
)

func newFailuresCmd() *cobra.Command {
	var integration string
	var all bool
	cmd := &cobra.Command{
		Use:   "failures",
		Short: "Failed and quarantined events grouped by cause, as work items (or: failures resolve ID --note …)",
		Long: `failures lists the failed and quarantined events grouped by integration, status, the
error class of their last attempt and the error's signature (its text with numbers and
UUIDs masked), most recent first, with counts, first and last seen and sample keys.
Resolved groups (an operator said what was done, and none of their events failed since)
are left out unless --all. "failures resolve ID --note …" records a resolution, audited;
the events stay as they are: replay them to apply them (intake replay --status failed).`,
		Args: cobra.NoArgs,
	}
	af := addAPIFlags(cmd)
	cmd.Flags().StringVar(&integration, "integration", "", "only this integration")
	af.completeFlagIntegration(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "resolved groups too")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		l, err := api.FailureGroups(cmd.Context(), integration, all)
		if err != nil {
			return fail(cmd, err)
		}
		if af.structured() {
			return af.emit(cmd.OutOrStdout(), l)
		}
		return printFailureGroups(af.table(cmd.OutOrStdout()), l.Groups)
	}
	cmd.AddCommand(newFailuresResolveCmd())
	return cmd
}

func printFailureGroups(tw *tabwriter.Writer, groups []apiclient.FailureGroup) error {
	fmt.Fprintln(tw, "ID\tINTEGRATION\tSTATUS\tCLASS\tEVENTS\tFIRST SEEN\tLAST SEEN\tRESOLVED\tSIGNATURE\tSAMPLE")
	for _, g := range groups {
		resolved := "-"
		if g.ResolvedBy != nil {
			resolved = *g.ResolvedBy
			if !g.Resolved {
				resolved += " (reopened)"
			}
		}
		sample := "-"
		if len(g.SampleKeys) > 0 {
			sample = g.SampleKeys[0]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.Integration, g.Status, g.ErrorClass, g.Events,
			fmtTime(g.FirstSeen), fmtTime(g.LastSeen), resolved, cut.UTF8(g.Signature, 60), sample)
	}
	return tw.Flush()
}

func newFailuresResolveCmd() *cobra.Command {
	var note string
	cmd := &cobra.Command{
		Use:   "resolve ID",
		Short: "Record that a failure group was dealt with (an operator token; audited)",
		Args:  cobra.ExactArgs(1),
	}
	af := addAPIFlags(cmd)
	cmd.Flags().StringVar(&note, "note", "", "what was done, or why nothing needs to be (required)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		g, err := api.ResolveFailureGroup(cmd.Context(), args[0], note)
		if err != nil {
			return fail(cmd, err)
		}
		if af.structured() {
			return af.emit(cmd.OutOrStdout(), g)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "resolved %s: %d %s events of %s (%s) by %s\n", g.ID, g.Events, g.Status, g.Integration,
			g.ErrorClass, *g.ResolvedBy)
		return nil
	}
	return cmd
}
