package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/replayer/apiclient"
)

func newEventsCmd() *cobra.Command {
	var (
		integration, tenant, eventType, status, prefix, since, until, cursor string
		limit                                                                int
		all                                                                  bool
	)
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List events from the inbox, newest first (or: events show KEY)",
		Long: `events lists inbox rows, newest first, filtered by integration, tenant, type, status,
time of first receipt (--since/--until) and scoped-key prefix. "events show KEY" shows
one event with its conflicts, deliveries, executions and the replays that touched it.`,
		Args: cobra.NoArgs,
	}
	af := addAPIFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&integration, "integration", "", "only this integration")
	f.StringVar(&tenant, "tenant", "", "only this tenant")
	f.StringVar(&eventType, "type", "", "only this event type")
	f.StringVar(&status, "status", "", "only this status: processed, stale, failed, quarantined")
	f.StringVar(&prefix, "prefix", "", "scoped-key prefix, e.g. stripe-live/acct_1/evt_")
	f.StringVar(&since, "since", "", "first received at or after (RFC 3339, or a duration ago such as 2h)")
	f.StringVar(&until, "until", "", "first received before (RFC 3339, or a duration ago)")
	f.IntVar(&limit, "limit", 50, "rows per page (at most 1000)")
	f.StringVar(&cursor, "cursor", "", "continue after a previous page")
	f.BoolVar(&all, "all", false, "follow every page")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		from, to, err := parseSpan(since, until, time.Now())
		if err != nil {
			return err
		}
		q := apiclient.EventQuery{Integration: integration, Tenant: tenant, EventType: eventType, Status: status,
			Since: from, Until: to, KeyPrefix: prefix, Limit: limit, Cursor: cursor}
		out := cmd.OutOrStdout()
		var events []apiclient.Event
		tw := newTable(out)
		if af.output == outputTable {
			fmt.Fprintln(tw, "KEY\tSTATUS\tTYPE\tTENANT\tDELIVERIES\tATTEMPTS\tCONFLICTS\tFIRST RECEIVED\tSTREAM SEQ")
		}
		for {
			page, err := api.Events(cmd.Context(), q)
			if err != nil {
				return fail(cmd, err)
			}
			for _, e := range page.Events {
				if af.output == outputJSON {
					events = append(events, e)
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\n", e.Key, e.Status, e.EventType, e.Tenant,
					e.DeliveryCount, e.Attempts, e.Conflicts, fmtTime(e.FirstReceivedAt), e.StreamSeq)
			}
			q.Cursor = page.NextCursor
			if !all || q.Cursor == "" {
				break
			}
		}
		if af.output == outputJSON {
			if events == nil {
				events = []apiclient.Event{}
			}
			return printJSON(out, map[string]any{"events": events, "next_cursor": q.Cursor})
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if q.Cursor != "" {
			fmt.Fprintf(out, "more: add --cursor %s (or --all)\n", q.Cursor)
		}
		return nil
	}
	cmd.AddCommand(newEventShowCmd())
	return cmd
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
		if af.output == outputJSON {
			return printJSON(cmd.OutOrStdout(), ev)
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
	row("attempts", ev.Attempts)
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
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\n", fmtTime(c.DetectedAt), short(c.OriginalSHA256, 16),
				short(c.ConflictingSHA256, 16), c.OriginalStreamSeq, c.ConflictingStreamSeq)
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
				r.ItemState, short(r.Reason, 40))
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
