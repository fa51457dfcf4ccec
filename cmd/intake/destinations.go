package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/internal/cut"
	"github.com/intakehq/intake/replayer/apiclient"
)

func newDestinationsCmd() *cobra.Command {
	var window string
	cmd := &cobra.Command{
		Use:     "destinations",
		Aliases: []string{"destination", "dest"},
		Short:   "HTTP destinations: state, backlog, success rate; show, attempts, pause, resume, retry",
		Long: `destinations lists the config's HTTP destinations (docs/destinations.md) with their state
(healthy, failing: a dispatcher's circuit breaker is open or most attempts of the window
failed, paused: by an operator), the messages waiting for each in INTAKE_OUT and the age
of the oldest, and the window's attempts, delivered, retried and failed.

  intake destinations show NAME          the destination, its newest attempts, its pauses
  intake destinations attempts NAME      its delivery log (--outcome failed, --key, --since)
  intake destinations pause NAME --reason "…"   stop deliveries on every dispatcher (audited)
  intake destinations resume NAME        deliver again
  intake destinations retry NAME         deliver its failed deliveries again, to it only,
                                         under their webhook-ids (a redelivery: dry run first)`,
		Args: cobra.NoArgs,
	}
	af := addAPIFlags(cmd)
	cmd.Flags().StringVar(&window, "window", "", "how far back the counts look (15m, 1h; default: the API's, 15m)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		l, err := api.Destinations(cmd.Context(), window)
		if err != nil {
			return fail(cmd, err)
		}
		if af.structured() {
			return af.emit(cmd.OutOrStdout(), l)
		}
		return printDestinations(af.table(cmd.OutOrStdout()), l.Destinations, af.output == outputWide)
	}
	cmd.AddCommand(newDestinationShowCmd(), newDestinationAttemptsCmd(), newDestinationPauseCmd(true), newDestinationPauseCmd(false),
		newDestinationRetryCmd())
	return cmd
}

func printDestinations(tw *tabwriter.Writer, list []apiclient.Destination, wide bool) error {
	head := "NAME\tSTATE\tBACKLOG\tOLDEST\tATTEMPTS\tDELIVERED\tRETRIED\tFAILED\tSUCCESS\tLAST"
	if wide {
		head += "\tURL\tPAUSED BY\tREASON"
	}
	fmt.Fprintln(tw, head)
	for _, d := range list {
		backlog, oldest := "?", "?"
		if d.Backlog != nil {
			backlog = strconv.FormatUint(*d.Backlog, 10)
		}
		if d.OldestUndeliveredAgeSeconds != nil {
			oldest = fmtAge(*d.OldestUndeliveredAgeSeconds)
		}
		success := "-"
		if d.SuccessRate != nil {
			success = fmt.Sprintf("%.1f%%", 100**d.SuccessRate)
		}
		last := "-"
		if a := d.LastAttempt; a != nil {
			last = a.Outcome
			if a.StatusCode != nil {
				last += " " + strconv.Itoa(*a.StatusCode)
			} else if a.ErrorClass != "" {
				last += " " + a.ErrorClass
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s", d.Name, d.State, backlog, oldest, d.Attempts, d.Delivered,
			d.Retried, d.Failed, success, last)
		if wide {
			by, reason := "-", "-"
			if d.PausedBy != nil && d.Paused {
				by, reason = *d.PausedBy, cut.UTF8(*d.PausedReason, 60)
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s", d.URL, by, reason)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// fmtAge prints an age in seconds as the largest whole unit: 42s, 5m, 3h.
func fmtAge(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%dh", int(d.Hours()))
}

func newDestinationShowCmd() *cobra.Command {
	var window string
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "One destination: its state, newest attempts and the operators' pauses",
		Args:  cobra.ExactArgs(1),
	}
	af := addAPIFlags(cmd)
	cmd.Flags().StringVar(&window, "window", "", "how far back the counts look (default 15m)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		d, err := api.Destination(cmd.Context(), args[0], window)
		if err != nil {
			return fail(cmd, err)
		}
		if af.structured() {
			return af.emit(cmd.OutOrStdout(), d)
		}
		w := cmd.OutOrStdout()
		if err := printDestinations(af.table(w), []apiclient.Destination{d.Destination}, true); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nmatch: tenants %v, integrations %v, types %v (empty: any)\n", d.Match.Tenants, d.Match.Integrations, d.Match.Types)
		fmt.Fprintln(w, "\nNewest attempts:")
		if err := printDispatchAttempts(newTable(w), d.RecentAttempts); err != nil {
			return err
		}
		if len(d.Actions) > 0 {
			fmt.Fprintln(w, "\nPauses and resumes:")
			tw := newTable(w)
			fmt.Fprintln(tw, "AT\tACTION\tBY\tREASON")
			for _, a := range d.Actions {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", fmtTime(a.At), a.Action, a.RequestedBy, cut.UTF8(a.Reason, 80))
			}
			return tw.Flush()
		}
		return nil
	}
	return cmd
}

func printDispatchAttempts(tw *tabwriter.Writer, list []apiclient.DispatchAttempt) error {
	fmt.Fprintln(tw, "AT\tKEY\tWEBHOOK-ID\tATTEMPT\tOUTCOME\tSTATUS\tCLASS\tLATENCY\tNEXT\tRESPONSE")
	for _, a := range list {
		status, next := "-", "-"
		if a.StatusCode != nil {
			status = strconv.Itoa(*a.StatusCode)
		}
		if a.NextAttemptAt != nil {
			next = fmtTime(*a.NextAttemptAt)
		}
		class := a.ErrorClass
		if class == "" {
			class = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%dms\t%s\t%s\n", fmtTime(a.AttemptedAt), a.Key, a.WebhookID, a.Attempt,
			a.Outcome, status, class, a.LatencyMS, next, cut.UTF8(oneLine(a.Response), 60))
	}
	return tw.Flush()
}

// oneLine replaces a response's line breaks and tabs, which would break a
// table, with spaces.
func oneLine(s string) string {
	out := []rune(s)
	for i, r := range out {
		if r == '\n' || r == '\r' || r == '\t' {
			out[i] = ' '
		}
	}
	return string(out)
}

func newDestinationAttemptsCmd() *cobra.Command {
	var q apiclient.DispatchQuery
	var since, until string
	cmd := &cobra.Command{
		Use:   "attempts NAME",
		Short: "A destination's delivery log, newest first (exit 1 when nothing matches)",
		Args:  cobra.ExactArgs(1),
	}
	af := addAPIFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&q.Outcome, "outcome", "", "delivered, retry or failed")
	f.StringVar(&q.Key, "key", "", "one event's scoped key")
	f.StringVar(&since, "since", "", "attempted since (RFC 3339 or an age: 2h, 2d)")
	f.StringVar(&until, "until", "", "attempted before (RFC 3339 or an age)")
	f.IntVar(&q.Limit, "limit", 0, "rows (default 100, at most 1000)")
	f.StringVar(&q.Cursor, "cursor", "", "the next page's cursor (printed on stderr)")
	_ = cmd.RegisterFlagCompletionFunc("outcome", cobra.FixedCompletions([]string{"delivered", "retry", "failed"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var err error
		if q.Since, q.Until, err = parseSpan(since, until, time.Now()); err != nil {
			return err
		}
		api, err := af.client()
		if err != nil {
			return err
		}
		p, err := api.DestinationAttempts(cmd.Context(), args[0], q)
		if err != nil {
			return fail(cmd, err)
		}
		if af.structured() {
			if err := af.emit(cmd.OutOrStdout(), p); err != nil {
				return err
			}
		} else if err := printDispatchAttempts(af.table(cmd.OutOrStdout()), p.Attempts); err != nil {
			return err
		}
		if p.NextCursor != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "more: --cursor %s\n", p.NextCursor)
		}
		if len(p.Attempts) == 0 {
			return exitError{code: codeError}
		}
		return nil
	}
	return cmd
}

func newDestinationPauseCmd(pause bool) *cobra.Command {
	var reason string
	use, short := "resume NAME", "Deliver to a paused destination again (an operator token; audited)"
	if pause {
		use, short = "pause NAME", "Stop deliveries to a destination on every dispatcher until resumed (an operator token; audited)"
	}
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(1)}
	af := addAPIFlags(cmd)
	help := "why (recorded)"
	if pause {
		help = "why deliveries stop (required; recorded)"
	}
	cmd.Flags().StringVar(&reason, "reason", "", help)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		d, err := api.PauseDestination(cmd.Context(), args[0], pause, reason)
		if err != nil {
			return fail(cmd, err)
		}
		if af.structured() {
			return af.emit(cmd.OutOrStdout(), d)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", d.Name, d.State)
		return nil
	}
	return cmd
}

func newDestinationRetryCmd() *cobra.Command {
	var (
		run          = runOptions{what: "redelivery"}
		reason       string
		since, until string
		rate         int
	)
	cmd := &cobra.Command{
		Use:   "retry NAME",
		Short: "Deliver a destination's failed deliveries again, to it only (a redelivery: dry run, confirm, follow)",
		Long: `retry redelivers, to destination NAME only, every message whose delivery to it failed
(the delivery log's last word on it; --since/--until bound when it failed). The copies
carry their original webhook-id, so a receiver that recorded one does not apply it twice;
other destinations and NATS subscribers never see them. It is a redelivery (intake
redeliver --source failed --destination NAME): dry run first, a reason in the audit log.

Exit codes as for replay.`,
		Args: cobra.ExactArgs(1),
	}
	af := addAPIFlags(cmd)
	run.add(cmd)
	f := cmd.Flags()
	f.StringVar(&reason, "reason", "", "why: recorded in the audit log")
	f.StringVar(&since, "since", "", "failed since (RFC 3339 or an age: 2h, 2d)")
	f.StringVar(&until, "until", "", "failed before (RFC 3339 or an age)")
	f.IntVar(&rate, "rate", 0, "messages per second (default: the replayer's, 100)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		now := time.Now()
		from, err := parseWhen("since", since, now)
		if err != nil {
			return err
		}
		to, err := parseWhen("until", until, now)
		if err != nil {
			return err
		}
		req := apiclient.RedeliveryRequest{Source: apiclient.SourceFailed, Destination: args[0],
			Selector: apiclient.RedeliverySelector{Since: from, Until: to}, Reason: reason, Rate: rate}
		return run.run(cmd, api, af, func(ctx context.Context, dry bool) (apiclient.Replay, error) {
			req.DryRun = &dry
			return api.StartRedelivery(ctx, req)
		})
	}
	return cmd
}
