package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/internal/cut"
	"github.com/intakehq/intake/pkg/envelope"
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
	af.completeFlagIntegration(cmd)
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
		if af.structured() {
			return af.emit(out, page)
		}
		tw := af.table(out)
		fmt.Fprintln(tw, "DETECTED\tKEY\tTENANT\tORIGINAL SHA256\tCONFLICTING SHA256\tORIGINAL SEQ\tCONFLICTING SEQ")
		for _, x := range page.Conflicts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", fmtTime(x.DetectedAt), x.Key, x.Tenant, cut.UTF8(x.OriginalSHA256, 16),
				cut.UTF8(x.ConflictingSHA256, 16), x.OriginalStreamSeq, x.ConflictingStreamSeq)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if page.NextCursor != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "more: add --cursor %s\n", page.NextCursor)
		}
		return nil
	}
	cmd.AddCommand(newConflictShowCmd())
	return cmd
}

func newConflictShowCmd() *cobra.Command {
	var id int64
	var full bool
	cmd := &cobra.Command{
		Use:   "show KEY",
		Short: "Show a conflict of KEY: the JSON fields that differ (a moved field is no change), --full both payloads",
		Long: `show reads the event's conflict (--id, default its latest) and both payloads from
INTAKE_IN, and lists the JSON paths whose values differ between the original and the
conflicting delivery, objects compared by key. --full prints both bodies too.`,
		Example: `  intake conflicts show demo/main/evt_1`,
		Args:    cobra.ExactArgs(1),
	}
	af := addAPIFlags(cmd)
	cmd.Flags().Int64Var(&id, "id", 0, "the conflict's id (default: the event's latest conflict)")
	cmd.Flags().BoolVar(&full, "full", false, "print both payloads")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		k, ok := envelope.ParseKey(args[0])
		if !ok {
			return fmt.Errorf("%q is not a scoped key {integration}/{account}/{event_id}", args[0])
		}
		if id == 0 {
			ev, err := api.EventInAccount(cmd.Context(), k.Integration, k.Account, k.EventID)
			if err != nil {
				return fail(cmd, err)
			}
			if len(ev.ConflictRecords) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s has no conflict\n", k)
				return exitError{code: codeError}
			}
			for _, c := range ev.ConflictRecords {
				id = max(id, c.ID)
			}
		}
		d, err := api.ConflictDiff(cmd.Context(), k.String(), id)
		if err != nil {
			return fail(cmd, err)
		}
		out := cmd.OutOrStdout()
		if af.structured() {
			return af.emit(out, d)
		}
		c := d.Conflict
		fmt.Fprintf(out, "conflict %d on %s, detected %s\n  original     seq %d sha256 %s\n  conflicting  seq %d sha256 %s\n", c.ID, c.Key,
			fmtTime(c.DetectedAt), c.OriginalStreamSeq, cut.UTF8(c.OriginalSHA256, 16), c.ConflictingStreamSeq, cut.UTF8(c.ConflictingSHA256, 16))
		for _, p := range []apiclient.ConflictPayload{d.Original, d.Conflicting} {
			if p.Missing != "" {
				fmt.Fprintf(out, "  %s\n", p.Missing)
			}
		}
		switch {
		case d.Structural && len(d.Fields) == 0:
			fmt.Fprintln(out, "no field differs: the same JSON in another spelling (key order, spacing)")
		case d.Structural:
			tw := newTable(out)
			fmt.Fprintln(tw, "FIELD\tCHANGE\tORIGINAL\tCONFLICTING")
			for _, f := range d.Fields {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Path, f.Op, cut.UTF8(f.Left, 60), cut.UTF8(f.Right, 60))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		case d.Original.Missing == "" && d.Conflicting.Missing == "":
			fmt.Fprintln(out, "the payloads are not both JSON: --full prints them")
		}
		if full {
			fmt.Fprintf(out, "\n--- original\n%s\n--- conflicting\n%s\n", d.Original.Body, d.Conflicting.Body)
		}
		return nil
	}
	return cmd
}
