package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/internal/cut"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/replayer/apiclient"
)

// eventFlags are the filters and paging of `intake events`.
type eventFlags struct {
	integration, tenant, eventType, status, prefix, since, until, cursor string
	limit                                                                int
	all                                                                  bool
}

func (f *eventFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.integration, "integration", "", "only this integration")
	fs.StringVar(&f.tenant, "tenant", "", "only this tenant")
	fs.StringVar(&f.eventType, "type", "", "only this event type")
	fs.StringVar(&f.status, "status", "", "only this status: processed, stale, failed, quarantined, or retrying (a handler failed; the next attempt is due)")
	fs.StringVar(&f.prefix, "prefix", "", "scoped-key prefix, e.g. stripe-live/acct_1/evt_")
	fs.StringVar(&f.since, "since", "", "first received at or after (RFC 3339, or a duration ago such as 2h)")
	fs.StringVar(&f.until, "until", "", "first received before (RFC 3339, or a duration ago)")
	fs.IntVar(&f.limit, "limit", 50, "rows per page (at most 1000)")
	fs.StringVar(&f.cursor, "cursor", "", "continue after a previous page")
	fs.BoolVar(&f.all, "all", false, "follow every page")
}

// query is the API's filter for the flags, durations counted back from now.
func (f *eventFlags) query(now time.Time) (apiclient.EventQuery, error) {
	since, until, err := parseSpan(f.since, f.until, now)
	return apiclient.EventQuery{Integration: f.integration, Tenant: f.tenant, EventType: f.eventType, Status: f.status,
		Since: since, Until: until, KeyPrefix: f.prefix, Limit: f.limit, Cursor: f.cursor}, err
}

func newEventsCmd() *cobra.Command {
	var ef eventFlags
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List events from the inbox, newest first (or: events show KEY)",
		Long: `events lists inbox rows, newest first, filtered by integration, tenant, type, status,
time of first receipt (--since/--until) and scoped-key prefix. "events show KEY" shows
one event with its conflicts, deliveries, executions and the replays that touched it.`,
		Args: cobra.NoArgs,
	}
	af := addAPIFlags(cmd)
	ef.add(cmd)
	af.completeFlagIntegration(cmd)
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(
		[]string{"processed", "stale", "failed", "quarantined", "retrying"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		q, err := ef.query(time.Now())
		if err != nil {
			return err
		}
		events, next, err := listEvents(cmd.Context(), api, q, ef.all)
		if err != nil {
			return fail(cmd, err)
		}
		return printEvents(cmd.OutOrStdout(), cmd.ErrOrStderr(), af, events, next)
	}
	cmd.AddCommand(newEventShowCmd(), newEventFindCmd(), newEventSearchCmd())
	return cmd
}

// listEvents reads the page q names, and with all every page after it. It
// returns the events and the cursor after the last page read ("" at the end).
func listEvents(ctx context.Context, api *apiclient.Client, q apiclient.EventQuery, all bool) ([]apiclient.Event, string, error) {
	var events []apiclient.Event
	for {
		page, err := api.Events(ctx, q)
		if err != nil {
			return nil, "", err
		}
		events = append(events, page.Events...)
		q.Cursor = page.NextCursor
		if !all || q.Cursor == "" {
			return events, q.Cursor, nil
		}
	}
}

// printEvents writes a table with the way to the next page, or for JSON
// one page of all the events read.
func printEvents(w, hints io.Writer, af *apiFlags, events []apiclient.Event, next string) error {
	if af.structured() {
		if events == nil {
			events = []apiclient.Event{}
		}
		return af.emit(w, map[string]any{"events": events, "next_cursor": next})
	}
	tw := af.table(w)
	wide := af.output == outputWide
	header := "KEY\tSTATUS\tTYPE\tTENANT\tDELIVERIES\tATTEMPTS\tCONFLICTS\tFIRST RECEIVED\tSTREAM SEQ"
	if wide {
		header += "\tLAST RECEIVED\tPROCESSED\tPAYLOAD SHA256\tERROR"
	}
	fmt.Fprintln(tw, header)
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d", e.Key, e.Status, e.EventType, e.Tenant,
			e.DeliveryCount, e.Attempts, e.Conflicts, fmtTime(e.FirstReceivedAt), e.StreamSeq)
		if wide {
			processed, errText := "-", "-"
			if e.ProcessedAt != nil {
				processed = fmtTime(*e.ProcessedAt)
			}
			if e.Error != nil {
				errText = cut.UTF8(*e.Error, 80)
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s", fmtTime(e.LastReceivedAt), processed, e.PayloadSHA256, errText)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(hints, "more: add --cursor %s (or --all)\n", next)
	}
	return nil
}

func newEventShowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show KEY",
		Short: "Show one event: inbox row, conflicts, deliveries, executions, replays",
		Long: `show takes a scoped key {integration}/{account}/{event_id} (the account may be
empty: "partner//ord_1").`,
		Args: cobra.ExactArgs(1),
	}
	af := addAPIFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		k, ok := envelope.ParseKey(args[0])
		if !ok {
			return fmt.Errorf("%q is not a scoped key {integration}/{account}/{event_id}", args[0])
		}
		ev, err := api.EventInAccount(cmd.Context(), k.Integration, k.Account, k.EventID)
		if err != nil {
			return fail(cmd, err)
		}
		if af.structured() {
			return af.emit(cmd.OutOrStdout(), ev)
		}
		return printEvent(cmd.OutOrStdout(), ev)
	}
	return cmd
}

func printEvent(w io.Writer, ev apiclient.EventDetail) error {
	tw := newTable(w)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("key", ev.Key)
	row("status", ev.Status)
	row("tenant", ev.Tenant)
	row("type", ev.EventType)
	row("payload sha256", ev.PayloadSHA256)
	row("stream seq", ev.StreamSeq)
	row("deliveries", ev.DeliveryCount)
	if ev.MaxDeliver > 0 {
		row("attempts", fmt.Sprintf("%d of %d", ev.Attempts, ev.MaxDeliver))
	} else {
		row("attempts", ev.Attempts)
	}
	if ev.NextAttemptAt != nil {
		row("next attempt", fmtTime(*ev.NextAttemptAt)+" (the handler failed; no inbox row until it succeeds or runs out of attempts)")
	}
	row("first received", fmtTime(ev.FirstReceivedAt))
	row("last received", fmtTime(ev.LastReceivedAt))
	if ev.ProcessedAt != nil {
		row("processed", fmtTime(*ev.ProcessedAt))
	}
	if ev.Error != nil {
		row("error", *ev.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(ev.ConflictRecords) > 0 {
		fmt.Fprintln(w, "\nconflicts")
		tw = newTable(w)
		fmt.Fprintln(tw, "  DETECTED\tORIGINAL SHA256\tCONFLICTING SHA256\tORIGINAL SEQ\tCONFLICTING SEQ")
		for _, c := range ev.ConflictRecords {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\n", fmtTime(c.DetectedAt), cut.UTF8(c.OriginalSHA256, 16),
				cut.UTF8(c.ConflictingSHA256, 16), c.OriginalStreamSeq, c.ConflictingStreamSeq)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(ev.HandlerAttempts) > 0 {
		fmt.Fprintln(w, "\nfailed attempts")
		tw = newTable(w)
		fmt.Fprintln(tw, "  FAILED\tATTEMPT\tCLASS\tNEXT ATTEMPT\tSTREAM SEQ\tERROR")
		for _, a := range ev.HandlerAttempts {
			next := "- (the last)"
			if a.NextAttemptAt != nil {
				next = fmtTime(*a.NextAttemptAt)
			}
			fmt.Fprintf(tw, "  %s\t%d of %d\t%s\t%s\t%d\t%s\n", fmtTime(a.FailedAt), a.Delivery, a.MaxDeliver, a.ErrorClass, next,
				a.StreamSeq, cut.UTF8(a.Error, 80))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(ev.Deliveries) > 0 {
		fmt.Fprintln(w, "\ndeliveries")
		tw = newTable(w)
		fmt.Fprintln(tw, "  RECEIVED\tINSTANCE\tSTATUS\tANSWER\tRETRY HINTS")
		for _, d := range ev.Deliveries {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", fmtTime(d.ReceivedAt), d.Instance, d.StatusCode, d.Answer, fmtHints(d.RetryHints))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(ev.Executions) > 0 {
		fmt.Fprintln(w, "\nexecutions")
		tw = newTable(w)
		fmt.Fprintln(tw, "  EXECUTED\tMODE\tID\tREPLAY\tSTREAM SEQ")
		for _, e := range ev.Executions {
			replay := "-"
			if e.ReplayID != nil {
				replay = *e.ReplayID
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\n", fmtTime(e.ExecutedAt), e.Mode, e.ID, replay, e.StreamSeq)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(ev.Replays) > 0 {
		fmt.Fprintln(w, "\nreplays")
		tw = newTable(w)
		fmt.Fprintln(tw, "  CREATED\tID\tMODE\tBY\tSTATE\tTHIS EVENT\tREASON")
		for _, r := range ev.Replays {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", fmtTime(r.CreatedAt), r.ID, r.Mode, r.RequestedBy, r.State,
				r.ItemState, cut.UTF8(r.Reason, 40))
		}
		return tw.Flush()
	}
	return nil
}

// fmtHints renders retry hints as "Name=value …", or "-" when there are none.
func fmtHints(h map[string]string) string {
	if len(h) == 0 {
		return "-"
	}
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = k + "=" + h[k]
	}
	return strings.Join(parts, " ")
}
