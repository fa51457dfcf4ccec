package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/internal/cut"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

// rangeFlags are the selector flags replay and redeliver share.
type rangeFlags struct {
	keys        []string
	keysFile    string
	integration string
	tenant      string
	eventType   string
	fromSeq     uint64
	toSeq       uint64
	since       string
	until       string
}

func (r *rangeFlags) add(cmd *cobra.Command, stream string) {
	f := cmd.Flags()
	f.StringSliceVar(&r.keys, "key", nil, "scoped key {integration}/{account}/{event_id} (repeatable, or comma-separated)")
	f.StringVar(&r.keysFile, "keys-file", "", "file with one scoped key per line")
	f.StringVar(&r.integration, "integration", "", "only this integration")
	f.StringVar(&r.tenant, "tenant", "", "only this tenant")
	f.StringVar(&r.eventType, "type", "", "only this event type")
	f.Uint64Var(&r.fromSeq, "from-seq", 0, "first "+stream+" stream sequence")
	f.Uint64Var(&r.toSeq, "to-seq", 0, "last "+stream+" stream sequence (default: the end)")
	f.StringVar(&r.since, "since", "", "from this time (RFC 3339, or a duration ago such as 2h)")
	f.StringVar(&r.until, "until", "", "before this time (RFC 3339, or a duration ago)")
}

func (r *rangeFlags) resolve(now time.Time) (keys []string, seq *apiclient.SeqRange, since, until *time.Time, err error) {
	keys = append(keys, r.keys...)
	if r.keysFile != "" {
		b, err := os.ReadFile(r.keysFile)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("--keys-file: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				keys = append(keys, line)
			}
		}
	}
	if r.fromSeq > 0 || r.toSeq > 0 {
		seq = &apiclient.SeqRange{From: max(r.fromSeq, 1), To: r.toSeq}
	}
	if since, err = parseWhen("since", r.since, now); err != nil {
		return
	}
	until, err = parseWhen("until", r.until, now)
	return
}

// runOptions drive the dry-run → confirm → start → follow flow.
type runOptions struct {
	yes, dryRun, detach bool
	what                string // "replay" or "redelivery"
}

func (o *runOptions) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVarP(&o.yes, "yes", "y", false, "start without asking (the dry run is still shown)")
	f.BoolVar(&o.dryRun, "dry-run", false, "only show what would happen")
	f.BoolVar(&o.detach, "detach", false, "start and return; do not follow progress")
}

func newReplayCmd() *cobra.Command {
	var (
		sel    rangeFlags
		run    = runOptions{what: "replay"}
		status string
		mode   string
		reason string
		rate   int
		admit  bool
	)
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Replay events from INTAKE_IN through the inbox: dry run, confirm, follow",
		Long: `replay republishes events' original messages from INTAKE_IN, and the inbox decides:
an exact replay of a processed event applies nothing, of a failed or quarantined one
runs the handler again; --mode reexecute runs the handler again regardless (a new,
linked execution; needs --reason).

It always shows the dry run first (counts by tenant, integration, type and predicted
outcome, sample keys), asks for confirmation (or --yes), then follows progress.

Select by --key/--keys-file, by a stream range (--from-seq/--to-seq, --since/--until),
or by inbox --status; --integration, --tenant and --type narrow any of them.

--admit-replayed-bodies (with --key/--keys-file only) applies deliveries the replay
guard refused (reason replayed_body) that you judged genuine: each copy skips the
guard and applies under its own key.

Exit codes: 0 done; 1 error or not confirmed; 2 the API refused; 3 finished partly
(events missing from the stream, or cancelled); 4 failed.`,
		Args: cobra.NoArgs,
	}
	af := addAPIFlags(cmd)
	sel.add(cmd, "INTAKE_IN")
	run.add(cmd)
	f := cmd.Flags()
	f.StringVar(&status, "status", "", "inbox status: failed, quarantined, stale or processed")
	f.StringVar(&mode, "mode", string(inbox.ReplayExact), "exact (the inbox decides) or reexecute (the handler runs again)")
	f.StringVar(&reason, "reason", "", "why: recorded in the audit log (required for reexecute)")
	f.IntVar(&rate, "rate", 0, "events per second (default: the replayer's, "+strconv.Itoa(replayer.DefaultReplayRate)+")")
	f.BoolVar(&admit, "admit-replayed-bodies", false, "apply the keys' deliveries even where the replay guard refused their bodies (--key/--keys-file only)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		keys, seq, since, until, err := sel.resolve(time.Now())
		if err != nil {
			return err
		}
		req := apiclient.ReplayRequest{
			Selector: apiclient.Selector{Keys: keys, Integration: sel.integration, Tenant: sel.tenant, EventType: sel.eventType,
				StreamSeq: seq, Since: since, Until: until, Status: status},
			Mode: inbox.ReplayMode(mode), Reason: reason, Rate: rate, AdmitReplayedBodies: admit,
		}
		return run.run(cmd, api, af, func(ctx context.Context, dry bool) (apiclient.Replay, error) {
			req.DryRun = &dry
			return api.StartReplay(ctx, req)
		})
	}
	cmd.AddCommand(newReplayStatusCmd(), newReplayApproveCmd(), newReplayCancelCmd(), newReplayListCmd())
	return cmd
}

// run is the operator flow: dry run, show, confirm, start, follow. start
// posts the request as a dry run or for real.
func (o *runOptions) run(cmd *cobra.Command, api *apiclient.Client, af *apiFlags,
	start func(ctx context.Context, dryRun bool) (apiclient.Replay, error)) error {
	ctx := cmd.Context()
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	dry, err := start(ctx, true)
	if err != nil {
		return fail(cmd, err)
	}
	if o.dryRun || !af.structured() {
		if err := printReplay(out, af, dry); err != nil {
			return err
		}
	}
	publishable := dry.Publishable()
	if o.dryRun {
		return nil
	}
	if publishable == 0 {
		fmt.Fprintf(errw, "nothing to publish: no selected event has a message in the stream\n")
		if dry.Matched > 0 {
			return exitError{code: codePartial}
		}
		return nil
	}
	if !o.yes {
		fmt.Fprintf(errw, "Start this %s: publish %d messages (%s) at %d/s? [y/N] ", o.what, publishable, dry.Mode, dry.Rate)
		line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(errw, "not started; nothing was published")
			return exitError{code: codeError}
		}
	}
	rep, err := start(ctx, false)
	if err != nil {
		return fail(cmd, err)
	}
	if rep.Matched != dry.Matched {
		fmt.Fprintf(errw, "note: the selection changed since the dry run: %d events now (was %d)\n", rep.Matched, dry.Matched)
	}
	if rep.State == apiclient.ReplayAwaitingApproval {
		// Above api.replays.reexecute_approval_above: recorded, nothing
		// published until another operator approves.
		fmt.Fprintf(errw, "%s %s recorded: %d events; it awaits another operator's approval before it publishes:\n"+
			"  intake replay approve %s   (with another operator's token; intake replay cancel %s drops it)\n", o.what, rep.ID, rep.Matched, rep.ID, rep.ID)
		return printReplay(out, af, rep)
	}
	fmt.Fprintf(errw, "%s %s started: %d events\n", o.what, rep.ID, rep.Matched)
	if o.detach {
		if af.structured() {
			return af.emit(out, rep)
		}
		fmt.Fprintf(out, "follow: intake replay status %s\n", rep.ID)
		return nil
	}
	final, err := follow(ctx, api, errw, rep)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(errw, "\nstopped following; the %s continues on the server (intake replay cancel %s stops it)\n", o.what, rep.ID)
		}
		return fail(cmd, err)
	}
	if err := printReplay(out, af, final); err != nil {
		return err
	}
	return replayExit(final)
}

// follow polls a replay until it ends, writing progress (count, rate, ETA)
// to w: one rewritten line on a terminal, a line every few seconds otherwise.
func follow(ctx context.Context, api *apiclient.Client, w io.Writer, rep apiclient.Replay) (apiclient.Replay, error) {
	tty := isTerminal(w)
	start, startPublished := time.Now(), rep.Published
	lastLine := time.Time{}
	total := rep.Publishable()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		latest, err := api.Replay(ctx, rep.ID)
		if err != nil {
			return rep, err
		}
		if rep = latest; rep.State != apiclient.ReplayRunning {
			if tty {
				fmt.Fprintln(w)
			}
			return rep, nil
		}
		elapsed := time.Since(start).Seconds()
		rate := float64(rep.Published-startPublished) / max(elapsed, 0.001)
		eta := "-"
		if rate > 0 {
			eta = (time.Duration(float64(total-rep.Published)/rate) * time.Second).Round(time.Second).String()
		}
		line := fmt.Sprintf("%s  %d/%d published  %s  %.1f/s  ETA %s", progressBar(rep.Published, total, 24), rep.Published, total,
			percent(rep.Published, total), rate, eta)
		switch {
		case tty:
			fmt.Fprintf(w, "\r%s   ", line)
		case time.Since(lastLine) >= 5*time.Second:
			fmt.Fprintln(w, line)
			lastLine = time.Now()
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-tick.C:
		}
	}
}

func progressBar(done, total int64, width int) string {
	n := 0
	if total > 0 {
		n = int(done * int64(width) / total)
	}
	n = min(max(n, 0), width)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

func percent(done, total int64) string {
	if total == 0 {
		return "100%"
	}
	return fmt.Sprintf("%d%%", done*100/total)
}

// replayExit maps a finished replay to the command's exit code.
func replayExit(rep apiclient.Replay) error {
	switch {
	case rep.State == apiclient.ReplayFailed:
		return exitError{code: codeFailed}
	case rep.State == apiclient.ReplayCancelled || rep.Outcomes[apiclient.OutcomeMissing] > 0:
		return exitError{code: codePartial}
	case rep.State == apiclient.ReplayRunning:
		return nil
	}
	return nil
}

// printReplay shows a replay (or dry run): a summary, counts by tenant,
// integration, type and outcome, and sample keys.
func printReplay(w io.Writer, af *apiFlags, rep apiclient.Replay) error {
	if af.structured() {
		return af.emit(w, rep)
	}
	kind := rep.Mode + " replay"
	if rep.Mode == apiclient.ReplayRedeliver {
		kind = "redelivery"
	}
	if rep.AdmitReplayedBodies {
		kind += " admitting replayed bodies"
	}
	if rep.DryRun {
		kind = "dry run of a " + kind
	}
	fmt.Fprintf(w, "%s %s\n", kind, rep.ID)
	fmt.Fprintf(w, "  state %s   matched %d   published %d   rate %d/s   by %s   at %s\n",
		rep.State, rep.Matched, rep.Published, rep.Rate, rep.RequestedBy, fmtTime(rep.CreatedAt))
	if rep.Reason != "" {
		fmt.Fprintf(w, "  reason %s\n", rep.Reason)
	}
	if rep.Error != nil {
		fmt.Fprintf(w, "  error %s\n", *rep.Error)
	}
	if rep.CancelledBy != nil {
		fmt.Fprintf(w, "  cancelled by %s\n", *rep.CancelledBy)
	}
	if rep.ApprovedBy != nil {
		fmt.Fprintf(w, "  approved by %s\n", *rep.ApprovedBy)
	}
	if len(rep.Counts) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "  TENANT\tINTEGRATION\tTYPE\tOUTCOME\tCOUNT")
		for _, c := range rep.Counts {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\n", c.Tenant, c.Integration, c.EventType, c.Outcome, c.Count)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rep.Sample) > 0 {
		fmt.Fprintf(w, "  sample %s\n", strings.Join(rep.Sample, ", "))
	}
	if n := len(rep.UnknownKeys); n > 0 {
		have := fmt.Sprintf("%d keys have", n)
		if n == 1 {
			have = "1 key has"
		}
		fmt.Fprintf(w, "  %s no inbox row and no refusal record, nothing to replay by key (check the key, or intake events find EVENT_ID; an event never processed: intake reconcile): %s\n",
			have, strings.Join(rep.UnknownKeys, ", "))
	}
	return printResults(w, rep.Results)
}

// resultOrder is the order results print in: done, not done, still to come.
var resultOrder = []string{"processed", "failed_again", "deduplicated", "stale", "rejected", "conflict",
	"in_flight", "unpublished", "missing", "no_record"}

// printResults shows what became of a replay's copies beside the predicted
// outcomes: the totals, then predicted outcome by result.
func printResults(w io.Writer, res *apiclient.ReplayResults) error {
	if res == nil {
		return nil
	}
	var parts []string
	for _, r := range resultOrder {
		if n := res.Counts[r]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r, n))
		}
	}
	fmt.Fprintf(w, "  results (settled up to seq %d): %s\n", res.Settled, strings.Join(parts, "   "))
	if len(res.ByPrediction) == 0 {
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "  PREDICTED\tRESULT\tCOUNT")
	for _, c := range res.ByPrediction {
		fmt.Fprintf(tw, "  %s\t%s\t%d\n", c.Predicted, c.Result, c.Count)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.Counts[apiclient.ResultInFlight] > 0 {
		fmt.Fprintln(w, "  (in_flight: published, not yet settled by the processor; ask again)")
	}
	return nil
}

func newReplayStatusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a replay or redelivery (--follow waits for it with a progress line, --watch prints it again)",
		Long: `status shows a replay or redelivery: its state and counts, what the dry run predicted and,
once copies are published, what became of them. --follow waits for a running one with a progress
line and then prints it; --watch 5s prints it again every 5 s until it has ended (done, failed or
cancelled) or you interrupt it.`,
		Example: `  intake replay status 0193…
  intake replay status --watch 5s 0193…`,
		Args: cobra.ExactArgs(1),
	}
	af := addAPIFlags(cmd)
	var wait bool
	var watch time.Duration
	cmd.Flags().BoolVarP(&wait, "follow", "f", false, "follow progress until it ends")
	cmd.Flags().DurationVar(&watch, "watch", 0, "print again every this long until it ends or you interrupt (e.g. 5s)")
	cmd.MarkFlagsMutuallyExclusive("follow", "watch")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		for {
			rep, err := api.Replay(cmd.Context(), args[0])
			if err != nil {
				return fail(cmd, err)
			}
			if wait && rep.State == apiclient.ReplayRunning {
				if rep, err = follow(cmd.Context(), api, cmd.ErrOrStderr(), rep); err != nil {
					return fail(cmd, err)
				}
			}
			if err := printReplay(cmd.OutOrStdout(), af, rep); err != nil {
				return err
			}
			if watch <= 0 || replayEnded(rep) {
				return replayExit(rep)
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

// replayEnded reports whether rep will change no more.
func replayEnded(rep apiclient.Replay) bool {
	return rep.State != apiclient.ReplayRunning && rep.State != apiclient.ReplayAwaitingApproval
}

func newReplayApproveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approve ID",
		Short: "Approve a re-execution awaiting a second operator (another token than its requester's); it starts publishing",
		Args:  cobra.ExactArgs(1),
	}
	af := addAPIFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		rep, err := api.ApproveReplay(cmd.Context(), args[0])
		if err != nil {
			return fail(cmd, err)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "approved; follow: intake replay status --follow %s\n", rep.ID)
		return printReplay(cmd.OutOrStdout(), af, rep)
	}
	return cmd
}

func newReplayCancelCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a running replay or redelivery (what was published stays published)",
		Args:  cobra.ExactArgs(1),
	}
	af := addAPIFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		rep, err := api.CancelReplay(cmd.Context(), args[0])
		if err != nil {
			return fail(cmd, err)
		}
		return printReplay(cmd.OutOrStdout(), af, rep)
	}
	return cmd
}

func newReplayListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "The audit log: replays and redeliveries (dry runs with --dry-runs include or only), newest first",
		Args:  cobra.NoArgs,
	}
	af := addAPIFlags(cmd)
	var limit int
	var cursor, since, until string
	var q apiclient.ReplayQuery
	f := cmd.Flags()
	f.IntVar(&limit, "limit", 20, "rows per page")
	f.StringVar(&cursor, "cursor", "", "continue after a previous page")
	f.StringVar(&q.Mode, "mode", "", "only this mode: exact, reexecute or redeliver")
	f.StringVar(&q.State, "state", "", "only this state: awaiting_approval, running, done, failed or cancelled")
	f.StringVar(&q.RequestedBy, "requested-by", "", "only those requested by this token name (redrive: the re-drive's)")
	f.StringVar(&q.DryRuns, "dry-runs", apiclient.DryRunsExclude, "dry runs: exclude, include or only")
	f.StringVar(&since, "since", "", "created from this time (RFC 3339, or a duration ago such as 2h)")
	f.StringVar(&until, "until", "", "created before this time (RFC 3339, or a duration ago)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		if q.Since, q.Until, err = parseSpan(since, until, time.Now()); err != nil {
			return err
		}
		q.Limit, q.Cursor = limit, cursor
		page, err := api.Replays(cmd.Context(), q)
		if err != nil {
			return fail(cmd, err)
		}
		out := cmd.OutOrStdout()
		if af.structured() {
			return af.emit(out, page)
		}
		tw := af.table(out)
		fmt.Fprintln(tw, "ID\tCREATED\tBY\tMODE\tDRY RUN\tSTATE\tMATCHED\tPUBLISHED\tREASON")
		for _, r := range page.Replays {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\t%d\t%d\t%s\n", r.ID, fmtTime(r.CreatedAt), r.RequestedBy, r.Mode, r.DryRun,
				r.State, r.Matched, r.Published, cut.UTF8(r.Reason, 40))
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
