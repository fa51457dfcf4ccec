package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newEventFindCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "find WHAT",
		Short: "Find events by what you have: a key, integration/event_id, the provider's event id, an INTAKE_IN sequence",
		Long: `find asks the replayer which events WHAT names, read every way it can be: a scoped
key (demo/main/evt_7), integration/event_id (demo/evt_7), the provider's event id alone
(evt_7, looked up in every configured integration), or an INTAKE_IN stream sequence
(42, in:42, seq:42). It prints each match with its status and how it was found; with no
match it says where it looked, on stderr, and exits 1 (docs/operator.md#exit-codes).`,
		Example: `  intake events find evt_7
  intake events find 1042          # the event stored at INTAKE_IN sequence 1042`,
		Args: cobra.ExactArgs(1),
	}
	af := addAPIFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		res, err := api.Find(cmd.Context(), args[0])
		if err != nil {
			return fail(cmd, err)
		}
		if af.structured() {
			if err := af.emit(cmd.OutOrStdout(), res); err != nil {
				return err
			}
		} else if len(res.Matches) > 0 {
			tw := af.table(cmd.OutOrStdout())
			fmt.Fprintln(tw, "KEY\tSTATUS\tTYPE\tFOUND BY\tFIRST RECEIVED\tSTREAM SEQ")
			for _, m := range res.Matches {
				if m.Event == nil {
					fmt.Fprintf(tw, "%s\t-\t-\t%s\t-\t-\n", m.Key, m.How)
					continue
				}
				e := m.Event
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", m.Key, e.Status, e.EventType, m.How, fmtTime(e.FirstReceivedAt), e.StreamSeq)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, m := range res.Matches {
				if m.Note != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", m.Key, m.Note)
				}
			}
		}
		if len(res.Matches) == 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "nothing found for %q; searched: %s\n", args[0], strings.Join(res.Searched, "; "))
			return exitError{code: codeError}
		}
		return nil
	}
	return cmd
}
