package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/replayer"
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
	c := addClientFlags(cmd)
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
		if err := c.check(); err != nil {
			return err
		}
		q := url.Values{}
		for k, v := range map[string]string{"integration": integration, "tenant": tenant, "event_type": eventType,
			"status": status, "key_prefix": prefix} {
			if v != "" {
				q.Set(k, v)
			}
		}
		now := time.Now()
		for name, v := range map[string]string{"since": since, "until": until} {
			t, err := parseWhen(name, v, now)
			if err != nil {
				return err
			}
			if t != nil {
				q.Set(name, t.Format(time.RFC3339Nano))
			}
		}
		q.Set("limit", strconv.Itoa(limit))
		out := cmd.OutOrStdout()
		var events []any
		tw := newTable(out)
		if c.output == outputTable {
			fmt.Fprintln(tw, "KEY\tSTATUS\tTYPE\tTENANT\tDELIVERIES\tATTEMPTS\tCONFLICTS\tFIRST RECEIVED\tSTREAM SEQ")
		}
		for {
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var page replayer.EventPage
			if _, err := c.do(cmd.Context(), http.MethodGet, "/api/v1/events?"+q.Encode(), nil, &page); err != nil {
				return fail(cmd, err)
			}
			for _, e := range page.Events {
				if c.output == outputJSON {
					events = append(events, e)
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\n", e.Key, e.Status, e.EventType, e.Tenant,
					e.DeliveryCount, e.Attempts, e.Conflicts, fmtTime(e.FirstReceivedAt), e.StreamSeq)
			}
			cursor = page.NextCursor
			if !all || cursor == "" {
				break
			}
		}
		if c.output == outputJSON {
			if events == nil {
				events = []any{}
			}
			return printJSON(out, map[string]any{"events": events, "next_cursor": cursor})
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if cursor != "" {
			fmt.Fprintf(out, "more: add --cursor %s (or --all)\n", cursor)
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
	c := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := c.check(); err != nil {
			return err
		}
		k, ok := envelope.ParseKey(args[0])
		if !ok {
			return fmt.Errorf("%q is not a scoped key {integration}/{account}/{event_id}", args[0])
		}
		path := "/api/v1/events/" + url.PathEscape(k.Integration) + "/" + url.PathEscape(k.EventID) +
			"?account=" + url.QueryEscape(k.Account)
		var ev replayer.EventDetail
		if _, err := c.do(cmd.Context(), http.MethodGet, path, nil, &ev); err != nil {
			return fail(cmd, err)
		}
		if c.output == outputJSON {
			return printJSON(cmd.OutOrStdout(), ev)
		}
		return printEvent(cmd.OutOrStdout(), ev)
	}
	return cmd
}

func printEvent(w io.Writer, ev replayer.EventDetail) error {
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
