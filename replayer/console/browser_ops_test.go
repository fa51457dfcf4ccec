package console_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/replayer/apiclient"
)

// opsConfig is testConfig with the replay guard on (a body sent again
// under another id is refused: a rejection) and the re-drive on, so that
// its start pass is there to see.
var opsConfig = strings.NewReplacer("redrive_interval: -1s", "redrive_interval: 1h",
	"    account: main\n", "    account: main\n    replay_guard: true\n").Replace(testConfig)

// TestBrowserReplayResultsRejectionsGapsRedrive (issue 34 items 4 and 6):
// a finished replay's page shows what became of its copies beside the
// prediction, and links its rejected copies to the rejections page; the
// audit log leaves dry runs out until asked; the rejections page filters
// as the events page does and is reached from the overview and from
// reconcile's "rejected on purpose"; the gap check and the re-drive passes
// have pages linked from reconcile.
func TestBrowserReplayResultsRejectionsGapsRedrive(t *testing.T) {
	path := chromium(t)
	r := setupConfig(t, opsConfig)
	r.failing.Store(key("evt_bug").String(), true)
	r.publish("evt_ok", `{"id":"evt_ok"}`)
	r.publish("evt_bug", `{"id":"evt_bug"}`)
	r.publish("evt_orig", `{"id":"evt_orig"}`)
	copySeq := r.publish("evt_copy", `{"id":"evt_orig"}`) // evt_orig's body: the replay guard refuses it
	r.settled()

	ctx := context.Background()
	api := apiclient.New(r.base, operatorToken, nil)
	dry := true
	dryRun, err := api.StartReplay(ctx, apiclient.ReplayRequest{Selector: apiclient.Selector{Keys: []string{key("evt_ok").String()}}, DryRun: &dry})
	if err != nil {
		t.Fatal(err)
	}
	no := false
	rep, err := api.StartReplay(ctx, apiclient.ReplayRequest{Selector: apiclient.Selector{StreamSeq: &apiclient.SeqRange{From: 1, To: copySeq}},
		DryRun: &no, Reason: "what happens to each"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, func() bool {
		got, err := api.Replay(ctx, rep.ID)
		return err == nil && got.State == apiclient.ReplayDone
	}, "the replay never finished")
	r.settled()

	b := browser(t, path)
	signInBrowser(t, b, r.base, viewerToken)

	// Item 4: the results beside the prediction.
	run(t, b, "replay page", chromedp.Navigate(r.base+"/ui/replays/"+rep.ID), chromedp.WaitVisible(chromedp.CSS("#results")))
	for sel, want := range map[string]string{"#result-deduplicated": "2", "#result-failed_again": "1", "#result-rejected": "1"} {
		if got := text(t, b, sel); got != want {
			t.Errorf("%s = %q, want %s", sel, got, want)
		}
	}
	rows := value(t, b, "results rows", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#results tbody tr")).map(tr => Array.from(tr.cells).map(c => c.textContent.trim()).join("|"))`))
	if !strings.Contains(strings.Join(rows, "\n"), "would_retry|1||") {
		t.Errorf("results rows %q: want would_retry → failed again 1", rows)
	}
	screenshot(t, b, "replay-results")
	run(t, b, "its rejected copies",
		chromedp.Click(chromedp.CSS("#rejections-link")),
		urlHas("replay_id="+rep.ID),
		chromedp.WaitVisible(chromedp.CSS("#rejections")),
	)
	if got := text(t, b, "#rejections tbody"); !strings.Contains(got, "replayed_body") || !strings.Contains(got, "demo/main/evt_copy") {
		t.Errorf("rejections of the replay: %q", got)
	}

	// The audit log: dry runs left out until asked for.
	run(t, b, "audit log", chromedp.Navigate(r.base+"/ui/replays"), chromedp.WaitVisible(chromedp.CSS("#replays")))
	if got := text(t, b, "#replays tbody"); !strings.Contains(got, rep.ID[:8]) || strings.Contains(got, dryRun.ID[:8]) {
		t.Errorf("default audit log %q: want the replay, not the dry run", got)
	}
	run(t, b, "only dry runs",
		chromedp.SetValue(chromedp.CSS("#dry_runs"), "only"),
		chromedp.Click(chromedp.CSS("#search")),
		urlHas("dry_runs=only"),
		chromedp.WaitVisible(chromedp.CSS("#replays")),
	)
	if got := text(t, b, "#replays tbody"); strings.Contains(got, rep.ID[:8]) || !strings.Contains(got, dryRun.ID[:8]) {
		t.Errorf("only dry runs %q: want the dry run alone", got)
	}
	screenshot(t, b, "replays-filtered")
	run(t, b, "unknown mode", chromedp.Navigate(r.base+"/ui/replays?mode=replay"), chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := text(t, b, "#error"); !strings.Contains(got, `mode: unknown "replay"; one of: exact, reexecute, redeliver`) {
		t.Errorf("unknown mode: %q", got)
	}

	// Item 6: rejections, from the overview, with the events page's filters.
	run(t, b, "overview → rejections",
		chromedp.Navigate(r.base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#checks-links")),
	)
	// Counted on the overview per integration, linked to the list.
	if n := text(t, b, `section[data-integration="demo"] td.rejected`); n != "2" {
		t.Errorf("overview: %q rejected in the last hour, want 2", n)
	}
	run(t, b, "overview → rejections (the links)",
		chromedp.Click(chromedp.CSS(`#checks-links a[href^="/ui/rejections"]`)),
		urlHas("/ui/rejections"),
		chromedp.WaitVisible(chromedp.CSS("#rejections")),
	)
	if n := value(t, b, "rejection rows", chromedp.Evaluate[int](`document.querySelectorAll("#rejections tbody tr").length`)); n != 2 {
		t.Errorf("%d rejections in the last day, want 2 (the delivery and the replay's copy)", n)
	}
	reasons := value(t, b, "reason options", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#reason option")).map(o => o.value)`))
	if len(reasons) < 3 || reasons[0] != "" || !strings.Contains(strings.Join(reasons, ","), "replayed_body") {
		t.Errorf("reason choices %q", reasons)
	}
	run(t, b, "filter by reason and key prefix",
		chromedp.SetValue(chromedp.CSS("#reason"), "replayed_body"),
		chromedp.SetValue(chromedp.CSS("#key_prefix"), "demo/main/evt_c"),
		chromedp.Click(chromedp.CSS("#search")),
		urlHas("reason=replayed_body"),
		chromedp.Click(chromedp.CSS(`#quick a[data-since="1h"]`)),
		urlHas("since=1h"),
		chromedp.WaitVisible(chromedp.CSS("#rejections")),
	)
	if u := value(t, b, "url", chromedp.Evaluate[string](`location.search`)); !strings.Contains(u, "reason=replayed_body") {
		t.Errorf("the quick range dropped the reason filter: %s", u)
	}
	screenshot(t, b, "rejections")
	for _, c := range []struct{ query, want string }{
		{"reason=bad_sig", `reason: unknown "bad_sig"; one of: unknown_integration`},
		{"since=yesterday", `since: not a time`},
		{"from_seq=x", `from_seq: not a non-negative integer`},
	} {
		run(t, b, c.query, chromedp.Navigate(r.base+"/ui/rejections?"+c.query), chromedp.WaitVisible(chromedp.CSS("#error")))
		if got := text(t, b, "#error"); !strings.Contains(got, c.want) {
			t.Errorf("%s: error %q, want it to say %q", c.query, got, c.want)
		}
	}

	// Reconcile's "rejected on purpose" leads to the range's rejections.
	s := strconv.FormatUint(copySeq, 10)
	run(t, b, "reconcile → rejections",
		chromedp.Navigate(r.base+"/ui/reconcile?from_seq=1&to_seq="+s+"&integration=demo"),
		chromedp.WaitVisible(chromedp.CSS("#rejected")),
	)
	if got := text(t, b, "#rejected"); got != "1" {
		t.Errorf("rejected on purpose = %q, want 1", got)
	}
	run(t, b, "click rejected", chromedp.Click(chromedp.CSS("#rejected")), urlHas("to_seq="+s), chromedp.WaitVisible(chromedp.CSS("#rejections")))
	if got := text(t, b, "#rejections tbody"); !strings.Contains(got, "demo/main/evt_copy") ||
		value(t, b, "range rows", chromedp.Evaluate[int](`document.querySelectorAll("#rejections tbody tr").length`)) != 1 {
		t.Errorf("the range's rejections: %q, want evt_copy's delivery alone", got)
	}

	// The gap check and the re-drive passes, from reconcile.
	testenv.Eventually(t, 60*time.Second, func() bool {
		st, err := api.Redrive(ctx)
		return err == nil && len(st.Passes) > 0
	}, "the re-drive's start pass never ran")
	run(t, b, "reconcile → gaps",
		chromedp.Navigate(r.base+"/ui/reconcile"),
		chromedp.Click(chromedp.CSS(`#checks a[href="/ui/gaps"]`)),
		urlHas("/ui/gaps"),
		chromedp.WaitVisible(chromedp.CSS("#gaps")),
	)
	if got := text(t, b, "#verdict"); got != "No gap" {
		t.Errorf("gap verdict %q, want No gap", got)
	}
	if got := text(t, b, "#deleted"); got != "0" {
		t.Errorf("deleted = %q", got)
	}
	screenshot(t, b, "gaps")
	run(t, b, "gaps → re-drive",
		chromedp.Click(chromedp.CSS(`#checks a[href="/ui/redrive"]`)),
		urlHas("/ui/redrive"),
		chromedp.WaitVisible(chromedp.CSS("#passes")),
	)
	if got := text(t, b, "#enabled"); got != "yes, every 1h0m0s" {
		t.Errorf("re-drive enabled: %q", got)
	}
	if got := text(t, b, "#passes tbody"); !strings.Contains(got, "start") {
		t.Errorf("re-drive passes %q, want the start pass", got)
	}
	if on := text(t, b, "header nav a.on"); on != "Reconcile" {
		t.Errorf("nav entry on: %q, want Reconcile", on)
	}
	screenshot(t, b, "redrive")
	run(t, b, "re-drive's replays",
		chromedp.Click(chromedp.CSS("#redrive-replays")),
		urlHas("requested_by=redrive"),
		chromedp.WaitVisible(chromedp.CSS("#replays")),
	)
	if got := text(t, b, "#replays tbody"); !strings.Contains(got, "No replays match") {
		t.Errorf("re-drive replays %q, want none", got)
	}
}
