package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/replayer/apiclient"
)

func newEventSearchCmd() *cobra.Command {
	var q apiclient.SearchQuery
	var since, until string
	cmd := &cobra.Command{
		Use:   "search --path PATH --value VALUE",
		Short: "Find INTAKE_IN messages whose JSON payload has VALUE at PATH, over a bounded window",
		Long: `search reads the payloads stored in INTAKE_IN over a time window (--since, default an
hour before --until, default now; at most api.payload_search.max_window) and prints the
messages whose JSON holds --value at --path (a dotted path, array positions as numbers:
data.object.customer, items.0.sku). It reads payloads: an operator token, or a viewer's
when api.payload_search.viewers is on. It reads at most api.payload_search.max_messages
messages and says so when it stopped there. Nothing found exits 1.`,
		Example: `  intake events search --path data.object.customer --value cus_123 --since 6h`,
		Args:    cobra.NoArgs,
	}
	af := addAPIFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&q.Path, "path", "", "dotted JSON path into the payload (required)")
	f.StringVar(&q.Value, "value", "", "the value there: a string's text, or a number, true, false, null")
	f.StringVar(&q.Integration, "integration", "", "only this integration")
	af.completeFlagIntegration(cmd)
	f.StringVar(&since, "since", "", "from this time (RFC 3339, or a duration ago such as 6h or 2d; default an hour before --until)")
	f.StringVar(&until, "until", "", "before this time (RFC 3339, or a duration ago; default now)")
	_ = cmd.MarkFlagRequired("path")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		if q.Since, q.Until, err = parseSpan(since, until, time.Now()); err != nil {
			return err
		}
		res, err := api.Search(cmd.Context(), q)
		if err != nil {
			return fail(cmd, err)
		}
		if af.structured() {
			if err := af.emit(cmd.OutOrStdout(), res); err != nil {
				return err
			}
		} else if len(res.Matches) > 0 {
			tw := af.table(cmd.OutOrStdout())
			fmt.Fprintln(tw, "KEY\tTYPE\tSTORED\tSTREAM SEQ")
			for _, m := range res.Matches {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", m.Key, m.EventType, fmtTime(m.StoredAt), m.StreamSeq)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "read %d messages stored %s to %s", res.Scanned, fmtTime(res.Since), fmtTime(res.Until))
		if res.Truncated {
			fmt.Fprint(cmd.ErrOrStderr(), " and stopped there (the bound): narrow the window")
		}
		fmt.Fprintln(cmd.ErrOrStderr())
		if len(res.Matches) == 0 {
			return exitError{code: codeError}
		}
		return nil
	}
	return cmd
}
