package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/replayer/apiclient"
)

func newReconcileCmd() *cobra.Command {
	var (
		fromSeq, toSeq            uint64
		since, until, integration string
	)
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Find accepted messages in INTAKE_IN that never reached the inbox, and the replay that fixes it",
		Long: `reconcile compares a range of INTAKE_IN (--from-seq/--to-seq or --since/--until) with
the inbox and lists messages acknowledged to the provider whose event has no inbox row.
Messages the processor has not acknowledged yet are counted as pending, not missing.

Exit codes: 0 nothing missing; 2 the API refused; 3 missing events found.`,
		Args: cobra.NoArgs,
	}
	af := addAPIFlags(cmd)
	f := cmd.Flags()
	f.Uint64Var(&fromSeq, "from-seq", 0, "first INTAKE_IN sequence")
	f.Uint64Var(&toSeq, "to-seq", 0, "last INTAKE_IN sequence (default: the end)")
	f.StringVar(&since, "since", "", "messages stored at or after (RFC 3339, or a duration ago such as 24h)")
	f.StringVar(&until, "until", "", "messages stored before")
	f.StringVar(&integration, "integration", "", "only this integration")
	af.completeFlagIntegration(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		from, to, err := parseSpan(since, until, time.Now())
		if err != nil {
			return err
		}
		q := apiclient.ReconcileQuery{FromSeq: fromSeq, ToSeq: toSeq, Since: from, Until: to, Integration: integration}
		if q.FromSeq == 0 && q.ToSeq == 0 && q.Since.IsZero() && q.Until.IsZero() {
			return fmt.Errorf("give --from-seq/--to-seq or --since/--until")
		}
		res, err := api.Reconcile(cmd.Context(), q)
		if err != nil {
			return fail(cmd, err)
		}
		out := cmd.OutOrStdout()
		if af.structured() {
			if err := af.emit(out, res); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(out, "checked %d messages (stream last seq %d, processor ack floor %d): %d missing, %d pending\n",
				res.Checked, res.LastSeq, res.AckFloor, len(res.Missing), res.Pending)
			if len(res.Missing) > 0 {
				tw := af.table(out)
				fmt.Fprintln(tw, "KEY\tSTREAM SEQ")
				for _, m := range res.Missing {
					fmt.Fprintf(tw, "%s\t%d\n", m.Key, m.StreamSeq)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if res.Truncated {
					fmt.Fprintln(out, "(list truncated; narrow the range)")
				}
			}
			if res.Fix != nil {
				fmt.Fprintf(out, "fix:\n  %s\n", fixCommand(res.Fix))
			}
		}
		if len(res.Missing) > 0 {
			return exitError{code: codePartial}
		}
		return nil
	}
	return cmd
}

// fixCommand renders the fix as an `intake replay` command line; long key
// lists go through a file.
func fixCommand(fix *apiclient.ReplayRequest) string {
	var b strings.Builder
	b.WriteString("intake replay")
	if s := fix.Selector.StreamSeq; s != nil {
		fmt.Fprintf(&b, " --from-seq %d --to-seq %d", s.From, s.To)
	}
	if len(fix.Selector.Keys) <= 10 {
		for _, k := range fix.Selector.Keys {
			fmt.Fprintf(&b, " --key %s", shellQuote(k))
		}
	} else {
		b.WriteString(" --keys-file missing.txt   # the keys above, one per line")
	}
	fmt.Fprintf(&b, " --reason %s", shellQuote(fix.Reason))
	return b.String()
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
