package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestSignInSessionAndCSRF walks the sign-in and every CSRF and role check
// with a plain HTTP client: the cookie flags, a forged sign-in, a POST
// without or with a wrong CSRF token, from another origin, and a viewer's
// forged mutation.
func TestSignInSessionAndCSRF(t *testing.T) {
	r := setup(t)
	r.publish("evt_1", `{"id":"evt_1","type":"invoice.paid"}`)
	r.settled()

	anon := r.client()
	resp, _ := anon.do(http.MethodGet, "/", nil, nil)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET / = %d %s, want 302 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = anon.do(http.MethodGet, "/ui/events", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/signin?next=") {
		t.Fatalf("GET /ui/events without a session = %d %s, want 303 to the sign-in form", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := anon.do(http.MethodPost, "/ui/replays/dry-run", url.Values{"key": {"demo/main/evt_1"}}, nil)
	must(t, "POST without a session", resp, body, http.StatusUnauthorized)

	// A sign-in without the form's double-submit value (a forged sign-in).
	resp, body = anon.do(http.MethodPost, "/ui/signin", url.Values{"token": {operatorToken}}, nil)
	must(t, "sign-in without the form's pre value", resp, body, http.StatusForbidden)
	resp, body = anon.do(http.MethodGet, "/ui/signin", nil, nil)
	pre := preRE.FindStringSubmatch(body)[1]
	resp, body = anon.do(http.MethodPost, "/ui/signin", url.Values{"pre": {pre}, "token": {"wrong-token-0123456789"}}, nil)
	must(t, "sign-in with a wrong token", resp, body, http.StatusUnauthorized)

	ops := r.client()
	csrf := ops.signIn(operatorToken)
	u, _ := url.Parse(r.base + "/ui/")
	var session *http.Cookie
	for _, c := range ops.hc.Jar.Cookies(u) {
		if c.Name == "intake_console" {
			session = c
		}
	}
	if session == nil {
		t.Fatal("no session cookie after sign-in")
	}
	// The jar hides the flags: read them from a fresh sign-in's Set-Cookie.
	fresh := r.client()
	_, body = fresh.do(http.MethodGet, "/ui/signin", nil, nil)
	resp, _ = fresh.do(http.MethodPost, "/ui/signin", url.Values{"pre": {preRE.FindStringSubmatch(body)[1]}, "token": {operatorToken}}, nil)
	var setCookie string
	for _, h := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(h, "intake_console=") {
			setCookie = h
		}
	}
	for _, flag := range []string{"HttpOnly", "SameSite=Strict", "Path=/ui/"} {
		if !strings.Contains(setCookie, flag) {
			t.Errorf("session Set-Cookie %q lacks %s", setCookie, flag)
		}
	}
	if strings.Contains(setCookie, "Secure") {
		t.Errorf("session Set-Cookie %q is Secure over plain HTTP: the browser would drop it", setCookie)
	}

	form := url.Values{"key": {"demo/main/evt_1"}}
	resp, body = ops.do(http.MethodPost, "/ui/replays/dry-run", form, nil)
	must(t, "operator POST without CSRF", resp, body, http.StatusForbidden)
	form.Set("csrf", csrf+"x")
	resp, body = ops.do(http.MethodPost, "/ui/replays/dry-run", form, nil)
	must(t, "operator POST with a wrong CSRF token", resp, body, http.StatusForbidden)
	form.Set("csrf", csrf)
	resp, body = ops.do(http.MethodPost, "/ui/replays/dry-run", form, http.Header{"Origin": {"https://evil.example"}})
	must(t, "operator POST from another origin", resp, body, http.StatusForbidden)
	resp, body = ops.do(http.MethodPost, "/ui/replays/dry-run", form, nil)
	must(t, "operator dry run", resp, body, http.StatusOK)
	if !strings.Contains(body, "would_deduplicate") {
		t.Errorf("dry run page lacks the predicted outcome:\n%s", body)
	}

	// The overview counts from Postgres.
	resp, body = ops.do(http.MethodGet, "/ui/", nil, nil)
	must(t, "overview", resp, body, http.StatusOK)
	if !strings.Contains(body, `data-integration="demo"`) || !strings.Contains(body, "<td>accepted</td><td>1</td><td>1</td>") {
		t.Errorf("overview lacks demo's one accepted event:\n%s", body)
	}

	// A viewer sees no mutating control and is refused one anyway.
	viewer := r.client()
	vcsrf := viewer.signIn(viewerToken)
	for _, path := range []string{"/ui/failed", "/ui/event?key=demo%2Fmain%2Fevt_1", "/ui/reconcile?from_seq=1"} {
		_, page := viewer.do(http.MethodGet, path, nil, nil)
		if strings.Contains(page, `class="mutate`) || strings.Contains(page, "/ui/replays/dry-run") {
			t.Errorf("viewer's %s shows a mutating control", path)
		}
	}
	resp, body = viewer.do(http.MethodPost, "/ui/replays/dry-run", url.Values{"key": {"demo/main/evt_1"}, "csrf": {vcsrf}}, nil)
	must(t, "viewer's forged dry run", resp, body, http.StatusForbidden)
	resp, body = viewer.do(http.MethodPost, "/ui/replays", url.Values{"key": {"demo/main/evt_1"}, "csrf": {vcsrf}, "reason": {"x"}}, nil)
	must(t, "viewer's forged replay", resp, body, http.StatusForbidden)

	// Sign-out ends the session even if the cookie is replayed (on every
	// replayer: TestSignOutEndsTheSessionOnEveryReplayer).
	resp, body = ops.do(http.MethodPost, "/ui/signout", url.Values{"csrf": {csrf}}, nil)
	must(t, "sign-out", resp, body, http.StatusSeeOther)
	replayed := r.client()
	replayed.hc.Jar.SetCookies(u, []*http.Cookie{{Name: "intake_console", Value: session.Value, Path: "/ui/"}})
	resp, _ = replayed.do(http.MethodGet, "/ui/events", nil, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a signed-out session's cookie still reads /ui/events: %d", resp.StatusCode)
	}
}

// TestSignInThrottled: the API's failed-authentication throttle guards the
// sign-in form: 10 bad tokens, then 429 with Retry-After. (The bucket
// refills one every 6 s, so on a slow machine a refill may allow another
// try or two before the 429.)
func TestSignInThrottled(t *testing.T) {
	r := setup(t)
	c := r.client()
	refused := 0
	for range 30 {
		_, page := c.do(http.MethodGet, "/ui/signin", nil, nil)
		resp, body := c.do(http.MethodPost, "/ui/signin", url.Values{"pre": {preRE.FindStringSubmatch(page)[1]}, "token": {"wrong-token-0123456789"}}, nil)
		if resp.StatusCode == http.StatusTooManyRequests {
			if refused < 10 {
				t.Fatalf("throttled after %d bad sign-ins, want 10", refused)
			}
			if resp.Header.Get("Retry-After") == "" {
				t.Error("throttled sign-in without Retry-After")
			}
			return
		}
		must(t, "a bad sign-in", resp, body, http.StatusUnauthorized)
		refused++
	}
	t.Fatalf("%d bad sign-ins, never throttled", refused)
}

// TestReplayProgressAndCancel: an operator starts a slow replay of every
// failed event from the queue, sees it running and cancels it.
func TestReplayProgressAndCancel(t *testing.T) {
	r := setup(t)
	for i := range 20 {
		id := "evt_" + string(rune('a'+i))
		r.failing.Store(key(id).String(), true)
		r.publish(id, `{"id":"`+id+`"}`)
	}
	r.settled()
	ops := r.client()
	csrf := ops.signIn(operatorToken)
	resp, body := ops.do(http.MethodPost, "/ui/replays/dry-run", url.Values{"csrf": {csrf}, "all": {"1"}, "status": {"failed"}}, nil)
	must(t, "dry run of all failed", resp, body, http.StatusOK)
	if !strings.Contains(body, `<td>would_retry</td><td>20</td>`) {
		t.Fatalf("dry run does not predict 20 retries:\n%s", body)
	}
	sel := regexp.MustCompile(`name="selector" value="([^"]+)"`).FindStringSubmatch(body)
	if sel == nil {
		t.Fatalf("dry run page without the selector to confirm:\n%s", body)
	}
	form := url.Values{"csrf": {csrf}, "selector": {html.UnescapeString(sel[1])}, "mode": {"exact"}, "rate": {"1"}}
	resp, body = ops.do(http.MethodPost, "/ui/replays", form, nil)
	must(t, "confirm without a reason", resp, body, http.StatusBadRequest)
	form.Set("reason", "the bug is fixed")
	resp, body = ops.do(http.MethodPost, "/ui/replays", form, nil)
	must(t, "confirm", resp, body, http.StatusSeeOther)
	page := resp.Header.Get("Location")
	resp, body = ops.do(http.MethodGet, page+"?fragment=progress", nil, nil)
	must(t, "progress", resp, body, http.StatusOK)
	if !strings.Contains(body, `data-state="running"`) || !strings.Contains(body, `id="cancel"`) {
		t.Fatalf("a replay at 1 event/s is not shown running with a cancel button:\n%s", body)
	}
	resp, body = ops.do(http.MethodPost, page+"/cancel", url.Values{"csrf": {csrf}}, nil)
	must(t, "cancel", resp, body, http.StatusSeeOther)
	_, body = ops.do(http.MethodGet, page, nil, nil)
	if !strings.Contains(body, `data-state="cancelled"`) || !strings.Contains(body, "Cancelled by") {
		t.Fatalf("replay not shown cancelled:\n%s", body)
	}
}

// TestReconcileProposesAFix: an inbox row lost behind Intake's back is
// found missing, and the operator dry-runs the fix from the page.
func TestReconcileProposesAFix(t *testing.T) {
	r := setup(t)
	r.publish("evt_1", `{"id":"evt_1"}`)
	r.publish("evt_2", `{"id":"evt_2"}`)
	r.settled()
	if _, err := r.tr.DB.Exec(context.Background(), `DELETE FROM intake.inbox WHERE event_id = 'evt_2'`); err != nil {
		t.Fatal(err)
	}
	ops := r.client()
	csrf := ops.signIn(operatorToken)
	resp, body := ops.do(http.MethodGet, "/ui/reconcile?from_seq=1", nil, nil)
	must(t, "reconcile", resp, body, http.StatusOK)
	if !strings.Contains(body, `<dd id="missing">1</dd>`) || !strings.Contains(body, "demo/main/evt_2") || !strings.Contains(body, `id="dry-run-fix"`) {
		t.Fatalf("reconcile does not show evt_2 missing with a fix to dry-run:\n%s", body)
	}
	sel := regexp.MustCompile(`name="selector" value="([^"]+)"`).FindStringSubmatch(body)
	resp, body = ops.do(http.MethodPost, "/ui/replays/dry-run", url.Values{"csrf": {csrf}, "selector": {html.UnescapeString(sel[1])}}, nil)
	must(t, "dry run of the fix", resp, body, http.StatusOK)
	if !strings.Contains(body, `<td>would_apply</td><td>1</td>`) {
		t.Fatalf("the fix's dry run does not predict evt_2 applied:\n%s", body)
	}
	// A viewer reads the check but gets no button.
	viewer := r.client()
	viewer.signIn(viewerToken)
	_, body = viewer.do(http.MethodGet, "/ui/reconcile?from_seq=1", nil, nil)
	if !strings.Contains(body, `<dd id="missing">1</dd>`) || strings.Contains(body, `id="dry-run-fix"`) {
		t.Fatalf("viewer's reconcile: want the result without the fix's button:\n%s", body)
	}
}
