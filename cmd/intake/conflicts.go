package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/replayer/apiclient"
)

func newConflictsCmd() *cobra.Command {
	var (
		integration, tenant, prefix, since, until, cursor string
		limit                                             int
	)
	cmd := &cobra.Command{
		Use:   "conflicts",
		Short: "List same-id-different-payload deliveries: both hashes, both stream sequences, when",
		Args:  cobra.NoArgs,
	}
	af := addAPIFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&integration, "integration", "", "only this integration")
	f.StringVar(&tenant, "tenant", "", "only this tenant")
	f.StringVar(&prefix, "prefix", "", "scoped-key prefix")
	f.StringVar(&since, "since", "", "detected at or after (RFC 3339, or a duration ago such as 24h)")
	f.StringVar(&until, "until", "", "detected before")
	f.IntVar(&limit, "limit", 50, "rows per page (at most 1000)")
	f.StringVar(&cursor, "cursor", "", "continue after a previous page")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		from, to, err := parseSpan(since, until, time.Now())
		if err != nil {
			return err
		}
		page, err := api.Conflicts(cmd.Context(), apiclient.ConflictQuery{Integration: integration, Tenant: tenant,
			Since: from, Until: to, KeyPrefix: prefix, Limit: limit, Cursor: cursor})
		if err != nil {
			return fail(cmd, err)
		}
		out := cmd.OutOrStdout()
		if af.output == outputJSON {
			return printJSON(out, page)
		}
		tw := newTable(out)
		fmt.Fprintln(tw, "DETECTED\tKEY\tTENANT\tORIGINAL SHA256\tCONFLICTING SHA256\tORIGINAL SEQ\tCONFLICTING SEQ")
		for _, x := range page.Conflicts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", fmtTime(x.DetectedAt), x.Key, x.Tenant, short(x.OriginalSHA256, 16),
				short(x.ConflictingSHA256, 16), x.OriginalStreamSeq, x.ConflictingStreamSeq)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if page.NextCursor != "" {
			fmt.Fprintf(out, "more: add --cursor %s\n", page.NextCursor)
		}
		return nil
	}
	return cmd
}
