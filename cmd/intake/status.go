package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/replayer/apiclient"
)

func newStatusCmd() *cobra.Command {
	var watch time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Health at a glance: INTAKE_IN's backlog and, per integration, the last hour's events, failures, retries and lag",
		Long: `status reads GET /api/v1/status: the processors' backlog in INTAKE_IN (undelivered,
unacknowledged, and the age of the oldest message past the ack floor) and, per
integration over the last hour, events accepted and per second, duplicate deliveries,
failed and quarantined events, events retrying now, the processing lag (p50 / p95,
replays left out), its messages waiting in INTAKE_IN past the ack floor (BACKLOG) and the
oldest one's age, and the requests ingress refused by status code and reason (401 bad
signature, 413 too large, 429 rate limited, 503 busy; ingress sends its counts every
10 s). --watch repeats it.`,
		Example: `  intake status
  intake status --watch 5s`,
		Args: cobra.NoArgs,
	}
	af := addAPIFlags(cmd)
	cmd.Flags().DurationVar(&watch, "watch", 0, "print again every this long until interrupted (e.g. 5s)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		for {
			s, err := api.Status(cmd.Context())
			if err != nil {
				return fail(cmd, err)
			}
			if af.structured() {
				err = af.emit(cmd.OutOrStdout(), s)
			} else {
				err = printStatus(cmd.OutOrStdout(), af, s)
			}
			if err != nil || watch <= 0 {
				return err
			}
			select {
			case <-cmd.Context().Done():
				return nil
			case <-time.After(watch):
				fmt.Fprintln(cmd.OutOrStdout())
			}
		}
	}
	return cmd
}

func printStatus(w io.Writer, af *apiFlags, s apiclient.Status) error {
	st := s.Stream
	oldest := "none waiting"
	if st.OldestUnprocessedAt != nil {
		oldest = fmt.Sprintf("oldest unprocessed %s ago (stored %s)", (time.Duration(st.OldestAgeSeconds) * time.Second).String(), fmtTime(*st.OldestUnprocessedAt))
	}
	fmt.Fprintf(w, "status at %s\nINTAKE_IN (durable %s): %d undelivered, %d unacknowledged, ack floor %d, delivered up to %d; %s\n",
		fmtTime(s.At), st.Durable, st.Pending, st.AckPending, st.AckFloor, st.Delivered, oldest)
	tw := af.table(w)
	fmt.Fprintf(tw, "INTEGRATION\tACCEPTED (%s)\tPER SECOND\tDUPLICATES\tFAILED\tQUARANTINED\tRETRYING NOW\tLAG P50 / P95\tBACKLOG\tOLDEST WAITING\tREFUSED\n", s.Window)
	for _, x := range s.Integrations {
		waiting, backlog := "-", "?" // ?: not counted (every scan slot busy)
		if x.OldestUnprocessedAt != nil {
			waiting = (time.Duration(x.OldestAgeSeconds) * time.Second).String()
		}
		if x.Backlog != nil {
			backlog = fmt.Sprint(*x.Backlog)
		}
		lag := x.LagP50 + " / " + x.LagP95
		if x.Accepted == 0 { // no event to measure: no lag, not a lag of 0s
			lag = "-"
		}
		rate := fmt.Sprintf("%.2f", x.PerSecond)
		if x.PerSecond > 0 && x.PerSecond < 0.005 { // 3 events in an hour are not 0.00/s
			rate = "<0.01"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", x.Name, x.Accepted, rate, x.Duplicates, x.Failed, x.Quarantined,
			x.Retrying, lag, backlog, waiting, refusalsText(x))
	}
	return tw.Flush()
}

// refusalsText is an integration's refusals as "12 (401 bad_signature 9,
// 429 rate_limited 3)", or "0".
func refusalsText(x apiclient.IntegrationStatus) string {
	if x.Refused == 0 {
		return "0"
	}
	parts := make([]string, 0, len(x.Refusals))
	for _, r := range x.Refusals {
		parts = append(parts, fmt.Sprintf("%d %s %d", r.StatusCode, r.Reason, r.Count))
	}
	return fmt.Sprintf("%d (%s)", x.Refused, strings.Join(parts, ", "))
}
