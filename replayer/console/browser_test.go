package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/replayer/apiclient"
)

// screenshotsEnv names a directory to write each page's screenshot to
// (make screenshots: docs/console).
const screenshotsEnv = "INTAKE_CONSOLE_SCREENSHOTS"

// chromium finds the browser: Debian's chromium (.ci/run installs it), or
// another Chrome on PATH.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium binary on PATH (apt-get install chromium; .ci/run installs it): browser tests skipped")
	return ""
}

// browser starts a headless Chromium with its own profile for the rest of
// the test. A launch that fails (the process exits before it listens: seen
// once on a loaded CI host, with nothing in its output but dbus noise) is
// tried again, twice at most, each failure logged; what the test then does
// in the browser is never retried.
func browser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	const attempts = 3
	for i := 1; ; i++ {
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(actx)
		// The first call starts the browser; it lives as long as ctx,
		// which must carry no timeout (each step gets its own: see run).
		err := chromedp.Do(ctx)
		if err == nil {
			t.Cleanup(func() { cancel(); cancelAlloc() })
			return ctx
		}
		cancel()
		cancelAlloc()
		if i == attempts {
			t.Fatalf("start chromium (%d attempts): %v", attempts, err)
		}
		t.Logf("start chromium, attempt %d of %d: %v", i, attempts, err)
		time.Sleep(time.Second)
	}
}

// incognito opens a tab in a new browser context of ctx's browser: its own
// cookies, as a second user's browser would have, without a second launch.
func incognito(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	ictx, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// As in browser: the first call opens the tab, which lives as long as
	// the context of that call, so it carries no timeout.
	if err := chromedp.Do(ictx); err != nil {
		t.Fatalf("open a new browser context: %v", err)
	}
	return ictx
}

// stepTimeout bounds one run of browser steps (a replay's progress
// included); two cores shared with other tests are slow.
const stepTimeout = 90 * time.Second

// run runs steps in the browser of ctx, failing the test with the page's
// address on error.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if _, err := eval(ctx, chromedp.Steps(steps...)); err != nil {
		url, _ := eval(ctx, chromedp.Location())
		t.Fatalf("%s: %v (at %s)", what, err, url)
	}
}

func eval[T any](ctx context.Context, a chromedp.Action[T]) (T, error) {
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	return chromedp.Run(sctx, a)
}

// value runs one action that returns a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := eval(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// urlHas waits until the page's URL contains s: the navigation a click
// started has committed, so the selectors that follow cannot match nodes of
// the page it left (chromedp then fails with "Could not find node").
func urlHas(s string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		for {
			if loc, err := chromedp.Location()(ctx, tg); err == nil && strings.Contains(loc, s) {
				return chromedp.Void{}, nil
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, fmt.Errorf("waiting for a URL with %q: %w", s, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return strings.TrimSpace(value(t, ctx, "read "+sel, chromedp.Text(chromedp.CSS(sel))))
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return
	}
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func signInBrowser(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(base+"/ui/events"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#events")),
	)
}

// TestBrowserOperatorAndViewer is the console's scenario in a real headless
// Chromium: an operator signs in, finds an event, opens a conflict's diff
// (the changed field by path, a moved one no change),
// dry-runs a replay of a failed event, confirms it and sees the audit row
// and the event processed; a viewer sees no mutating control, reads with
// JavaScript off, and a forged POST from its page is refused 403.
func TestBrowserOperatorAndViewer(t *testing.T) {
	path := chromium(t)
	r := setup(t)
	r.failing.Store(key("evt_bad").String(), true)
	r.publish("evt_ok", `{"id":"evt_ok","type":"invoice.paid","amount":100}`)
	r.publish("evt_bad", `{"id":"evt_bad","type":"invoice.paid","amount":7}`)
	r.publish("evt_conf", `{"id":"evt_conf","type":"invoice.paid","amount":100,"currency":"eur"}`)
	r.settled()
	// Another amount, and currency moved to the front: a moved field is no change.
	r.publish("evt_conf", `{"currency":"eur","id":"evt_conf","type":"invoice.paid","amount":250}`)
	r.settled()
	if n := r.tr.Count(t, `SELECT count(*) FROM intake.inbox WHERE status = 'failed'`); n != 1 {
		t.Fatalf("%d failed events, want 1 (evt_bad)", n)
	}

	ctx := browser(t, path)
	signInBrowser(t, ctx, r.base, operatorToken)
	screenshot(t, ctx, "events")
	if who := text(t, ctx, "#who"); !strings.Contains(who, "ops (operator)") {
		t.Fatalf("signed in as %q, want ops (operator)", who)
	}

	// Find the failed event by its key prefix and open it.
	run(t, ctx, "filter events",
		chromedp.SendKeys(chromedp.CSS("#key_prefix"), "demo/main/evt_b"),
		chromedp.Click(chromedp.CSS("#search")),
		urlHas("key_prefix=demo"), // else the next selector can match the unfiltered page being left
		chromedp.WaitVisible(chromedp.CSS(`#events a[href*="evt_bad"]`)),
		chromedp.Click(chromedp.CSS(`#events a[href*="evt_bad"]`)),
		urlHas("/ui/event?"),
		chromedp.WaitVisible(chromedp.CSS("#timeline")),
	)
	if s := text(t, ctx, "#status"); s != "failed" {
		t.Fatalf("event status %q, want failed", s)
	}
	if p := text(t, ctx, "#payload"); !strings.Contains(p, `"amount": 7`) {
		t.Fatalf("payload not shown pretty-printed: %q", p)
	}
	screenshot(t, ctx, "event")

	// The conflict's diff shows the changed amount side by side.
	run(t, ctx, "open conflict diff",
		chromedp.Navigate(r.base+"/ui/conflicts"),
		chromedp.WaitVisible(chromedp.CSS("#conflicts a.diff")),
	)
	screenshot(t, ctx, "conflicts")
	run(t, ctx, "click diff", chromedp.Click(chromedp.CSS("#conflicts a.diff")), urlHas("/ui/conflict?"), chromedp.WaitVisible(chromedp.CSS("#diff")))
	if n := text(t, ctx, "#changed"); n != "1" {
		t.Errorf("%s lines differ, want 1 (the amount)", n)
	}
	if d := text(t, ctx, "#diff tr.change"); !strings.Contains(d, `"amount": 100`) || !strings.Contains(d, `"amount": 250`) {
		t.Errorf("changed row %q, want both amounts", d)
	}
	if f := text(t, ctx, "#fields"); !strings.Contains(f, "$.amount") || strings.Contains(f, "$.currency") || strings.Contains(f, "$.id") {
		t.Errorf("changed fields %q, want $.amount only (currency only moved)", f)
	}
	screenshot(t, ctx, "conflict")

	// The bug is fixed: replay the failed event from the queue.
	r.failing.Delete(key("evt_bad").String())
	run(t, ctx, "dry run",
		chromedp.Navigate(r.base+"/ui/failed"),
		chromedp.WaitVisible(chromedp.CSS(`#failed input[value="demo/main/evt_bad"]`)),
		chromedp.Click(chromedp.CSS(`#failed input[value="demo/main/evt_bad"]`)),
	)
	screenshot(t, ctx, "failed")
	run(t, ctx, "dry run", chromedp.Click(chromedp.CSS("#dry-run-selected")), chromedp.WaitVisible(chromedp.CSS("#outcomes")))
	if o := text(t, ctx, "#outcomes"); !strings.Contains(o, "would_retry") {
		t.Fatalf("dry run outcomes %q, want would_retry", o)
	}
	screenshot(t, ctx, "dryrun")
	// The reason is required: the browser will not submit the form empty.
	valid := value(t, ctx, "reason required", chromedp.Evaluate[bool](`document.getElementById("confirm-form").checkValidity()`))
	if valid {
		t.Error("the confirm form is valid without a reason")
	}
	run(t, ctx, "confirm",
		chromedp.SendKeys(chromedp.CSS("#reason"), "fixed the tax bug"),
		chromedp.Click(chromedp.CSS("#confirm")),
		chromedp.WaitVisible(chromedp.CSS("#progress")),
	)
	// console.js follows the progress and reloads when the replay ends.
	run(t, ctx, "replay done", chromedp.WaitVisible(chromedp.CSS(`#progress[data-state="done"]`)))
	screenshot(t, ctx, "replay")
	run(t, ctx, "audit log", chromedp.Navigate(r.base+"/ui/replays"), chromedp.WaitVisible(chromedp.CSS("#replays")))
	if row := text(t, ctx, "#replays tbody tr:first-child"); !strings.Contains(row, "ops") || !strings.Contains(row, "fixed the tax bug") ||
		!strings.Contains(row, "done") {
		t.Errorf("audit row %q, want ops, the reason, done", row)
	}
	screenshot(t, ctx, "replays")
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.tr.Count(t, `SELECT count(*) FROM intake.inbox WHERE event_id = 'evt_bad' AND status = 'processed'`) == 1
	}, "evt_bad never processed")
	run(t, ctx, "event processed", chromedp.Navigate(r.base+"/ui/event?key=demo%2Fmain%2Fevt_bad"), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	if s := text(t, ctx, "#status"); s != "processed" {
		t.Errorf("event status after the replay %q, want processed", s)
	}
	if tl := text(t, ctx, "#timeline"); !strings.Contains(tl, "replay exact by ops") {
		t.Errorf("timeline lacks the replay: %q", tl)
	}
	run(t, ctx, "reconcile", chromedp.Navigate(r.base+"/ui/reconcile?from_seq=1"), chromedp.WaitVisible(chromedp.CSS("#result")))
	if m := text(t, ctx, "#missing"); m != "0" {
		t.Errorf("reconcile found %s missing, want 0", m)
	}
	screenshot(t, ctx, "reconcile")
	run(t, ctx, "overview", chromedp.Navigate(r.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#overview")))
	if o := text(t, ctx, `#overview [data-integration="demo"]`); !strings.Contains(o, "accepted") {
		t.Errorf("overview lacks demo's counts: %q", o)
	}
	screenshot(t, ctx, "overview")
	// Everything the page loaded came from the replayer itself.
	if ext := value(t, ctx, "resources", chromedp.Evaluate[[]string](
		`performance.getEntriesByType("resource").map(e => e.name).filter(n => !n.startsWith(location.origin + "/"))`)); len(ext) != 0 {
		t.Errorf("the console loaded external resources: %v", ext)
	}

	// A viewer: no mutating control; a POST forged from its own page, with
	// its own CSRF token, is refused.
	vctx := incognito(t, ctx)
	signInBrowser(t, vctx, r.base, viewerToken)
	for _, p := range []string{"/ui/failed", "/ui/event?key=demo%2Fmain%2Fevt_bad", "/ui/reconcile?from_seq=1"} {
		run(t, vctx, "viewer "+p, chromedp.Navigate(r.base+p), chromedp.WaitVisible(chromedp.CSS("main")))
		n := value(t, vctx, "count controls", chromedp.Evaluate[int](`document.querySelectorAll(".mutate, input[name=key], #confirm, #cancel").length`))
		if n != 0 {
			t.Errorf("viewer's %s shows %d mutating controls", p, n)
		}
	}
	status := value(t, vctx, "forged POST", chromedp.Evaluate[int](`fetch("/ui/replays", {method: "POST", credentials: "same-origin",
		body: new URLSearchParams({csrf: document.querySelector("input[name=csrf]").value,
			selector: JSON.stringify({keys: ["demo/main/evt_ok"]}), reason: "forged", mode: "reexecute"})}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if status != 403 {
		t.Errorf("viewer's forged POST /ui/replays = %d, want 403", status)
	}
	// Reading needs no JavaScript.
	if _, err := chromedp.Call(vctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	run(t, vctx, "no JavaScript", chromedp.Navigate(r.base+"/ui/event?key=demo%2Fmain%2Fevt_conf"), chromedp.WaitVisible(chromedp.CSS("#payload")))
	if p := text(t, vctx, "#payload"); !strings.Contains(p, `"currency": "eur"`) {
		t.Errorf("event page without JavaScript: payload %q", p)
	}
	// Every other page reads without it too: each shows what it lists.
	for p, want := range map[string]string{
		"/ui/":                     "demo",
		"/ui/events":               "evt_conf",
		"/ui/conflicts":            "evt_conf",
		"/ui/failed":               "Nothing failed", // the operator's replay processed evt_bad
		"/ui/replays":              "ops",
		"/ui/reconcile?from_seq=1": "Ack floor",
	} {
		run(t, vctx, "no JavaScript "+p, chromedp.Navigate(r.base+p), chromedp.WaitVisible(chromedp.CSS("main")))
		if got := text(t, vctx, "main"); !strings.Contains(got, want) {
			t.Errorf("%s without JavaScript shows no %q: %q", p, want, got)
		}
	}
	// And the pages those list: a conflict's diff, a replay's detail.
	for _, link := range []struct{ list, sel, want string }{
		{"/ui/conflicts", `a[href*="conflict?"]`, "eur"},
		{"/ui/replays", `a[href*="/ui/replays/"]`, "ops"},
	} {
		run(t, vctx, "no JavaScript "+link.list, chromedp.Navigate(r.base+link.list), chromedp.WaitVisible(chromedp.CSS("main")))
		attr := value(t, vctx, "link on "+link.list, chromedp.AttributeValue(chromedp.CSS(link.sel), "href"))
		if !attr.Exists {
			t.Fatalf("%s links to nothing matching %s", link.list, link.sel)
		}
		href := attr.Value
		if !strings.HasPrefix(href, "http") {
			href = r.base + href
		}
		run(t, vctx, "no JavaScript "+href, chromedp.Navigate(href), chromedp.WaitVisible(chromedp.CSS("main")))
		if got := text(t, vctx, "main"); !strings.Contains(got, link.want) {
			t.Errorf("%s without JavaScript shows no %q: %q", href, link.want, got)
		}
	}
	if n := r.tr.Count(t, `SELECT count(*) FROM intake.replays WHERE reason = 'forged'`); n != 0 {
		t.Errorf("the forged replay was recorded %d times", n)
	}
}

// TestBrowserFiltersSayWhatIsWrong (issue 34 item 7): a filter naming an
// integration or status that cannot exist is refused, naming the allowed
// values, instead of an empty page; the integration is a choice from the
// config; times may be relative as in the CLI ("2d"), and the quick ranges
// keep the other filters; a dry run of a key that names no event says so.
func TestBrowserFiltersSayWhatIsWrong(t *testing.T) {
	path := chromium(t)
	r := setup(t)
	r.publish("evt_recent", `{"id":"evt_recent","type":"invoice.paid"}`)
	r.settled()

	ctx := browser(t, path)
	signInBrowser(t, ctx, r.base, viewerToken)
	for _, c := range []struct{ query, want string }{
		{"integration=dmeo", `integration: unknown "dmeo"; one of: demo`},
		{"status=procesed", `status: unknown "procesed"; one of: processed, stale, failed, quarantined`},
		{"since=yesterday", `since: not a time`},
	} {
		run(t, ctx, c.query, chromedp.Navigate(r.base+"/ui/events?"+c.query), chromedp.WaitVisible(chromedp.CSS("#error")))
		if got := text(t, ctx, "#error"); !strings.Contains(got, c.want) {
			t.Errorf("%s: error %q, want it to say %q", c.query, got, c.want)
		}
	}
	run(t, ctx, "conflicts, unknown integration", chromedp.Navigate(r.base+"/ui/conflicts?integration=dmeo"), chromedp.WaitVisible(chromedp.CSS("#error")))

	// The integration is offered from the config.
	run(t, ctx, "events", chromedp.Navigate(r.base+"/ui/events"), chromedp.WaitVisible(chromedp.CSS("#integration")))
	opts := value(t, ctx, "integration options", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#integration option")).map(o => o.value)`))
	if strings.Join(opts, ",") != ",demo" {
		t.Errorf("integration choices %q, want any and demo", opts)
	}

	// Relative times: typed, and the quick range, which keeps the filter.
	run(t, ctx, "since 2d",
		chromedp.SendKeys(chromedp.CSS("#since"), "2d"),
		chromedp.SetValue(chromedp.CSS("#integration"), "demo"),
		chromedp.Click(chromedp.CSS("#search")),
		urlHas("since=2d"),
		chromedp.WaitVisible(chromedp.CSS(`#events a[href*="evt_recent"]`)),
	)
	run(t, ctx, "quick range 1 hour",
		chromedp.Click(chromedp.CSS(`#quick a[data-since="1h"]`)),
		urlHas("since=1h"),
		chromedp.WaitVisible(chromedp.CSS(`#events a[href*="evt_recent"]`)),
	)
	if u := value(t, ctx, "url", chromedp.Evaluate[string](`location.search`)); !strings.Contains(u, "integration=demo") {
		t.Errorf("the quick range dropped the integration filter: %s", u)
	}
	screenshot(t, ctx, "events-filtered")

	// A dry run of a key that names no event (a typo, or an event purged
	// since its page was loaded) says so, instead of an empty plan: the
	// event page's replay form, with its key changed.
	octx := incognito(t, ctx)
	signInBrowser(t, octx, r.base, operatorToken)
	run(t, octx, "dry run of an unknown key",
		chromedp.Evaluate[chromedp.Void](`(() => {
			const f = document.createElement("form");
			f.method = "post"; f.action = "/ui/replays/dry-run";
			for (const [k, v] of [["csrf", document.querySelector("input[name=csrf]").value], ["key", "demo/main/evt_typo"]]) {
				const i = document.createElement("input"); i.type = "hidden"; i.name = k; i.value = v; f.appendChild(i);
			}
			document.body.appendChild(f); f.submit();
		})()`),
		urlHas("/ui/replays/dry-run"),
		chromedp.WaitVisible(chromedp.CSS("#unknown-keys")),
	)
	if u := text(t, octx, "#unknown-keys"); !strings.Contains(u, "no inbox row and no refusal record") || !strings.Contains(u, "demo/main/evt_typo") {
		t.Errorf("dry run of an unknown key: %q", u)
	}
}

// TestBrowserNarrowAndNotFound (issue 34 item 8): at 420 px every nav link
// is on screen and the page does not scroll sideways; a console path that
// does not exist is a styled 404 page with the way back.
func TestBrowserNarrowAndNotFound(t *testing.T) {
	path := chromium(t)
	r := setup(t)
	ctx := browser(t, path)
	signInBrowser(t, ctx, r.base, viewerToken)
	run(t, ctx, "420 px", chromedp.EmulateViewport(420, 800, chromedp.EmulateMobile),
		chromedp.Navigate(r.base+"/ui/events"), chromedp.WaitVisible(chromedp.CSS("header nav")))
	offscreen := value(t, ctx, "nav links off screen", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("header nav a, #signout")).filter(a => { const b = a.getBoundingClientRect(); return b.left < 0 || b.right > innerWidth || b.width == 0 }).map(a => a.textContent)`))
	if len(offscreen) > 0 {
		t.Errorf("at 420 px these are off screen: %q", offscreen)
	}
	if w := value(t, ctx, "page width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 420 {
		t.Errorf("at 420 px the page is %d px wide: it scrolls sideways", w)
	}
	screenshot(t, ctx, "narrow")

	run(t, ctx, "not found", chromedp.Navigate(r.base+"/ui/nosuch"), chromedp.WaitVisible(chromedp.CSS("#error")))
	if h := text(t, ctx, "h1"); h != "Not found" {
		t.Errorf("404 page title %q, want Not found", h)
	}
	if bg := value(t, ctx, "styled", chromedp.Evaluate[string](`getComputedStyle(document.querySelector("header")).backgroundColor`)); bg != "rgb(17, 24, 39)" {
		t.Errorf("the 404 page is not the console's styled page (header background %q)", bg)
	}
}

// TestBrowserRetryingEventIsVisible (issue 34 item 1): an event whose
// handler fails and waits for its next attempt has no inbox row, yet the
// API, the events list, the event page and the overview show it as
// retrying — attempt n of max, the next attempt's time, each attempt's
// error — and once it succeeds it is processed with its failed attempts
// kept on its timeline.
func TestBrowserRetryingEventIsVisible(t *testing.T) {
	path := chromium(t)
	cfg := strings.Replace(testConfig, "processor: {ack_wait: 2s, concurrency: 2, max_deliver: 2}",
		"processor: {ack_wait: 2s, concurrency: 2, max_deliver: 4, backoff: [4s]}", 1)
	r := setupConfig(t, cfg)
	k := key("evt_flaky")
	r.transient.Store(k.String(), true)
	r.publish("evt_flaky", `{"id":"evt_flaky","type":"invoice.paid"}`)

	api := apiclient.New(r.base, viewerToken, nil)
	var ev apiclient.EventDetail
	testenv.Eventually(t, 30*time.Second, func() bool {
		var err error
		ev, err = api.Event(context.Background(), "demo", "evt_flaky")
		return err == nil && len(ev.HandlerAttempts) > 0
	}, "the API never showed the failing event")
	if ev.Status != "retrying" || ev.MaxDeliver != 4 || ev.NextAttemptAt == nil || ev.Attempts < 1 {
		t.Fatalf("retrying event = status %q, attempt %d of %d, next %v; want retrying, n of 4, a next attempt",
			ev.Status, ev.Attempts, ev.MaxDeliver, ev.NextAttemptAt)
	}
	if a := ev.HandlerAttempts[0]; a.ErrorClass != "error" || a.Error != "billing API answered 503" || a.NextAttemptAt == nil {
		t.Fatalf("first attempt = %+v", a)
	}
	if n := r.tr.Count(t, `SELECT count(*) FROM intake.inbox WHERE event_id = 'evt_flaky'`); n != 0 {
		t.Fatalf("a retrying event has %d inbox rows: the inbox holds decisions only", n)
	}
	page, err := api.Events(context.Background(), apiclient.EventQuery{Status: "retrying"})
	if err != nil || len(page.Events) != 1 || page.Events[0].Key != k.String() {
		t.Fatalf("?status=retrying = %+v, %v", page, err)
	}

	// Health at a glance (item 3): the retrying event holds the processors'
	// ack floor, so INTAKE_IN has an unprocessed message, and its age.
	st, err := api.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Integrations) != 1 || st.Integrations[0].Name != "demo" || st.Integrations[0].Retrying != 1 ||
		st.Stream.OldestUnprocessedAt == nil || st.Stream.AckPending < 1 {
		t.Errorf("status while retrying = %+v", st)
	}
	// The integration's own oldest message waiting: the retrying one.
	if len(st.Integrations) == 1 && (st.Integrations[0].OldestUnprocessedAt == nil ||
		!st.Integrations[0].OldestUnprocessedAt.Equal(*st.Stream.OldestUnprocessedAt)) {
		t.Errorf("demo's oldest waiting %v, want the stream's %v", st.Integrations[0].OldestUnprocessedAt, st.Stream.OldestUnprocessedAt)
	}
	// And its backlog, counted on its own subjects: the retrying message.
	if len(st.Integrations) == 1 && (st.Integrations[0].Backlog == nil || *st.Integrations[0].Backlog != 1) {
		t.Errorf("demo's backlog %v, want 1 (the retrying message)", st.Integrations[0].Backlog)
	}

	// Ingress's refusals as the receipt folder stores them (the fold
	// itself: TestRejectionsPublishNothing, TestRefusalSummariesFold…).
	if _, err := r.tr.DB.Exec(context.Background(), `INSERT INTO intake.ingress_refusals
			(summary_id, integration, instance, window_start, window_end, status_code, reason, refusals)
		VALUES ('s-1', 'demo', 'ingress-0', now() - interval '20 seconds', now() - interval '10 seconds', 401, 'bad_signature', 3),
		       ('s-1', 'demo', 'ingress-0', now() - interval '20 seconds', now() - interval '10 seconds', 429, 'rate_limited', 2)`); err != nil {
		t.Fatal(err)
	}

	ctx := browser(t, path)
	signInBrowser(t, ctx, r.base, viewerToken)
	run(t, ctx, "overview", chromedp.Navigate(r.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`section[data-integration="demo"] td.retrying`)))
	if n := text(t, ctx, `section[data-integration="demo"] .refused`); n != "5" {
		t.Errorf("overview: refused %q, want 5", n)
	}
	if l := text(t, ctx, `section[data-integration="demo"] ul.refusals`); !strings.Contains(l, "401 bad_signature 3") || !strings.Contains(l, "429 rate_limited 2") {
		t.Errorf("overview: refusals by reason %q", l)
	}
	if n := text(t, ctx, `section[data-integration="demo"] td.rejected`); n != "0" {
		t.Errorf("overview: rejected %q in the last hour, want 0", n)
	}
	if y := text(t, ctx, `section[data-integration="demo"] .yaxis`); !strings.Contains(y, "0") {
		t.Errorf("overview chart without a y axis: %q", y)
	}
	if c := text(t, ctx, `section[data-integration="demo"] figcaption`); !strings.Contains(c, "per hour, last 24 hours") {
		t.Errorf("overview chart caption %q, want the default range", c)
	}
	if n := text(t, ctx, `section[data-integration="demo"] td.retrying`); n != "1" {
		t.Errorf("overview: retrying %q, want 1", n)
	}
	// Nothing decided in the window: no lag to show, rather than 0s.
	if c := text(t, ctx, `section[data-integration="demo"]`); strings.Contains(c, "0s / 0s") {
		t.Errorf("overview: a processing lag of 0s with no event decided: %q", c)
	}
	if b := text(t, ctx, "#backlog"); !strings.Contains(b, "0 undelivered, 1 unacknowledged") {
		t.Errorf("overview backlog %q, want the retrying message unacknowledged", b)
	}
	if w := text(t, ctx, `section[data-integration="demo"] td.waiting`); w == "none" || !strings.Contains(w, "oldest") {
		t.Errorf("overview: demo's waiting %q, want the retrying message's age", w)
	}
	if n := text(t, ctx, `section[data-integration="demo"] td.waiting .backlog`); n != "1" {
		t.Errorf("overview: demo's backlog %q, want 1", n)
	}
	if b := text(t, ctx, "#backlog"); !strings.Contains(b, "oldest unprocessed") || !strings.Contains(b, "reloads every 30 s") {
		t.Errorf("overview backlog %q, want the oldest unprocessed message's age", b)
	}
	if n := value(t, ctx, "meta refresh", chromedp.Evaluate[int](`document.querySelectorAll('meta[http-equiv="refresh"]').length`)); n != 1 {
		t.Errorf("the overview does not reload itself (%d meta refresh)", n)
	}
	screenshot(t, ctx, "overview-retrying")
	run(t, ctx, "overview 7 days", chromedp.Click(chromedp.CSS(`#chart-ranges a[href*="chart=7d"]`)), urlHas("chart=7d"),
		chromedp.WaitVisible(chromedp.CSS(`section[data-integration="demo"] figcaption`)))
	if c := text(t, ctx, `section[data-integration="demo"] figcaption`); !strings.Contains(c, "per 6 hours, last 7 days") {
		t.Errorf("7-day chart caption %q", c)
	}
	if n := value(t, ctx, "7-day bars", chromedp.Evaluate[int](`document.querySelectorAll('section[data-integration="demo"] rect.bar').length`)); n != 28 {
		t.Errorf("7-day chart has %d bars, want 28", n)
	}
	run(t, ctx, "overview bad range", chromedp.Navigate(r.base+"/ui/?chart=1y"), chromedp.WaitVisible(chromedp.CSS("body")))
	if b := text(t, ctx, "body"); !strings.Contains(b, "one of: 6h, 24h, 7d") {
		t.Errorf("?chart=1y: %q", b)
	}
	run(t, ctx, "retrying list", chromedp.Navigate(r.base+"/ui/events?status=retrying"),
		chromedp.WaitVisible(chromedp.CSS(`#events a[href*="evt_flaky"]`)),
		chromedp.Click(chromedp.CSS(`#events a[href*="evt_flaky"]`)),
		urlHas("/ui/event?"),
		chromedp.WaitVisible(chromedp.CSS("#next-attempt")),
	)
	if s := text(t, ctx, "#status"); s != "retrying" {
		t.Errorf("event page status %q, want retrying", s)
	}
	if tl := text(t, ctx, "#timeline"); !strings.Contains(tl, "of 4 failed (error): billing API answered 503") {
		t.Errorf("timeline lacks the failed attempt: %q", tl)
	}
	// No inbox row to compare with: the payload's hash is checked against
	// the attempts' record, and no delivery count stands in for one.
	if m := text(t, ctx, "main"); !strings.Contains(m, "(matches the failed attempts' record)") || strings.Contains(m, "inbox row)") {
		t.Errorf("retrying event page: the payload's hash is said to match an inbox row: %q", m)
	}
	screenshot(t, ctx, "event-retrying")

	// The billing API is back: the next attempt succeeds.
	r.transient.Delete(k.String())
	testenv.Eventually(t, 60*time.Second, func() bool {
		return r.tr.Count(t, `SELECT count(*) FROM intake.inbox WHERE event_id = 'evt_flaky' AND status = 'processed'`) == 1
	}, "evt_flaky never processed after the handler recovered")
	run(t, ctx, "processed", chromedp.Navigate(r.base+"/ui/event?key=demo%2Fmain%2Fevt_flaky"), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	if s := text(t, ctx, "#status"); s != "processed" {
		t.Errorf("after recovery: status %q, want processed", s)
	}
	if tl := text(t, ctx, "#timeline"); !strings.Contains(tl, "billing API answered 503") {
		t.Errorf("after recovery the failed attempts are gone from the timeline: %q", tl)
	}
	if page, err := api.Events(context.Background(), apiclient.EventQuery{Status: "retrying"}); err != nil || len(page.Events) != 0 {
		t.Errorf("after recovery ?status=retrying = %+v, %v; want none", page, err)
	}
}

// TestBrowserFindBox (issue 34 item 2): the header's search box takes the
// provider's event id alone and opens the event; an id that matches
// nothing says where it looked.
func TestBrowserFindBox(t *testing.T) {
	path := chromium(t)
	r := setup(t)
	seq := r.publish("evt_found", `{"id":"evt_found","type":"invoice.paid"}`)
	r.settled()
	ctx := browser(t, path)
	signInBrowser(t, ctx, r.base, viewerToken)
	run(t, ctx, "find by event id",
		chromedp.SendKeys(chromedp.CSS("#find"), "evt_found\n"),
		urlHas("/ui/event?"),
		chromedp.WaitVisible(chromedp.CSS("#status")),
	)
	if h := text(t, ctx, "h1"); h != "demo/main/evt_found" {
		t.Errorf("find evt_found opened %q", h)
	}
	// Each search starts from the overview: typed on the event page the
	// previous search opened, the next one raced that page's load (the URL
	// and #status already matched) and its keys could be lost.
	run(t, ctx, "find by sequence",
		chromedp.Navigate(r.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#overview")),
		chromedp.SendKeys(chromedp.CSS("#find"), fmt.Sprintf("in:%d\n", seq)),
		urlHas("/ui/event?"),
		chromedp.WaitVisible(chromedp.CSS("#status")),
	)
	if h := text(t, ctx, "h1"); h != "demo/main/evt_found" {
		t.Errorf("find in:%d opened %q", seq, h)
	}
	run(t, ctx, "find nothing",
		chromedp.Navigate(r.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#overview")),
		chromedp.SendKeys(chromedp.CSS("#find"), "evt_nope\n"),
		urlHas("/ui/find?"),
		chromedp.WaitVisible(chromedp.CSS("#nothing")),
	)
	if s := text(t, ctx, "#nothing"); !strings.Contains(s, `event id "evt_nope" in integration demo`) {
		t.Errorf("nothing found says %q, want where it looked", s)
	}
}

// TestBrowserPayloadSearch (issue 34 item 2): an operator searches the
// payloads of a bounded window for a JSON field's value, from the events
// page, and opens the match; a path that does not parse is refused naming
// what is wrong; a viewer is refused (api.payload_search.viewers is off).
func TestBrowserPayloadSearch(t *testing.T) {
	path := chromium(t)
	r := setup(t)
	r.publish("evt_a", `{"id":"evt_a","type":"invoice.paid","data":{"customer":"cus_1"}}`)
	r.publish("evt_b", `{"id":"evt_b","type":"invoice.paid","data":{"customer":"cus_2"}}`)
	r.settled()
	ctx := browser(t, path)
	signInBrowser(t, ctx, r.base, operatorToken)
	run(t, ctx, "search payloads",
		chromedp.Click(chromedp.CSS("#search-payloads")),
		urlHas("/ui/search"),
		chromedp.WaitVisible(chromedp.CSS("#path")),
		chromedp.SendKeys(chromedp.CSS("#path"), "data.customer"),
		chromedp.SendKeys(chromedp.CSS("#value"), "cus_2"),
		chromedp.SetValue(chromedp.CSS("#integration"), "demo"),
		chromedp.SendKeys(chromedp.CSS("#since"), "1h"),
		chromedp.Click(chromedp.CSS("#search")),
		urlHas("value=cus_2"),
		chromedp.WaitVisible(chromedp.CSS("#matches")),
	)
	if m := text(t, ctx, "#matches tbody"); !strings.Contains(m, "demo/main/evt_b") || strings.Contains(m, "evt_a") {
		t.Errorf("matches %q, want evt_b alone", m)
	}
	if s := text(t, ctx, "#scanned"); !strings.Contains(s, "Read 2 messages") {
		t.Errorf("scanned %q, want the window's 2 messages", s)
	}
	screenshot(t, ctx, "search")
	run(t, ctx, "open the match", chromedp.Click(chromedp.CSS(`#matches a[href*="evt_b"]`)), urlHas("/ui/event?"),
		chromedp.WaitVisible(chromedp.CSS("#status")))
	if h := text(t, ctx, "h1"); h != "demo/main/evt_b" {
		t.Errorf("the match opened %q", h)
	}
	run(t, ctx, "a bad path", chromedp.Navigate(r.base+"/ui/search?path=data..customer&value=x"), chromedp.WaitVisible(chromedp.CSS("#error")))
	if e := text(t, ctx, "#error"); !strings.Contains(e, "segment 2 is empty") {
		t.Errorf("bad path: %q", e)
	}

	vctx := incognito(t, ctx)
	signInBrowser(t, vctx, r.base, viewerToken)
	if n := value(t, vctx, "viewer's link", chromedp.Evaluate[int](`document.querySelectorAll("#search-payloads").length`)); n != 0 {
		t.Errorf("a viewer is offered payload search")
	}
	run(t, vctx, "viewer search", chromedp.Navigate(r.base+"/ui/search?path=id&value=evt_a"), chromedp.WaitVisible(chromedp.CSS("#error")))
	if e := text(t, vctx, "#error"); !strings.Contains(e, "api.payload_search.viewers") {
		t.Errorf("viewer search: %q", e)
	}
}

// TestBrowserFailureGroups (issue 34 item 5): failed events grouped by
// cause, reached from the Failed page; an operator resolves a group with
// a note, and it leaves the open list.
func TestBrowserFailureGroups(t *testing.T) {
	path := chromium(t)
	r := setup(t)
	for _, id := range []string{"evt_b1", "evt_b2"} {
		r.failing.Store(key(id).String(), true)
		r.publish(id, `{"id":"`+id+`","type":"invoice.paid"}`)
	}
	r.settled()
	ctx := browser(t, path)
	signInBrowser(t, ctx, r.base, operatorToken)
	run(t, ctx, "failures", chromedp.Navigate(r.base+"/ui/failed"), chromedp.Click(chromedp.CSS("#by-cause")),
		urlHas("/ui/failures"), chromedp.WaitVisible(chromedp.CSS("#groups tr[data-group]")))
	if n := text(t, ctx, "#groups tr[data-group] td.events"); n != "2" {
		t.Errorf("group size %q, want 2", n)
	}
	if e := text(t, ctx, "#groups tr[data-group] td.err"); !strings.Contains(e, "cannot handle this event") {
		t.Errorf("group error %q", e)
	}
	screenshot(t, ctx, "failures")
	run(t, ctx, "resolve",
		chromedp.SendKeys(chromedp.CSS(`#groups input[name="note"]`), "fixed the handler; replaying"),
		chromedp.Submit(chromedp.CSS(`#groups form`)),
		chromedp.WaitVisible(chromedp.CSS("#groups td.empty")),
	)
	run(t, ctx, "resolved ones", chromedp.Click(chromedp.CSS("#toggle-all")), urlHas("all=true"),
		chromedp.WaitVisible(chromedp.CSS("#groups td.resolution")))
	if res := text(t, ctx, "#groups td.resolution"); !strings.Contains(res, "ops at") || !strings.Contains(res, "fixed the handler") {
		t.Errorf("resolution %q, want who and the note", res)
	}
}
