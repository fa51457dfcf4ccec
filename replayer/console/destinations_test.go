package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/envelope"
)

// TestDestinationPages (issue 32 item 4): the destinations list and a
// destination's page show its state and attempts; an operator pauses it
// (a reason required), resumes it and retries its failed deliveries (dry
// run, then a reason); a viewer sees no control and is refused; an event's
// timeline shows its deliveries.
func TestDestinationPages(t *testing.T) {
	hook := testrig.NewReceiver(t, http.StatusUnprocessableEntity, "unknown customer", http.StatusNoContent)
	r := &rig{t: t}
	r.tr = testrig.New(t, testrig.Options{Config: testConfig + `
destinations:
  - {name: crm, url: "` + hook.URL + `/in", secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], retry: [50ms]}
`})
	a := testrig.StartApp(t, r.tr.Config, intake.Options{Roles: intake.Roles{Processor: true, Replayer: true, Dispatcher: true}})
	r.base = a.URL
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, err := r.tr.JS.Consumer(context.Background(), envelope.StreamOut, "dispatch-crm")
		return err == nil
	}, "no dispatcher consumer")
	r.publish("evt_d1", `{"id":"evt_d1"}`)
	r.publish("evt_d2", `{"id":"evt_d2"}`)
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.tr.Count(t, `SELECT count(*) FROM intake.dispatch_attempts WHERE outcome = 'failed'`) == 2
	}, "the refused deliveries were never recorded failed")

	ops, viewer := r.client(), r.client()
	csrf := ops.signIn(operatorToken)
	vcsrf := viewer.signIn(viewerToken)
	resp, body := ops.do(http.MethodGet, "/ui/destinations", nil, nil)
	must(t, "destinations", resp, body, http.StatusOK)
	if !strings.Contains(body, `data-destination="crm"`) || !strings.Contains(body, `<span class="status failing">failing</span>`) {
		t.Fatalf("the list does not show crm failing:\n%s", body)
	}
	resp, body = ops.do(http.MethodGet, "/ui/destination?name=crm", nil, nil)
	must(t, "destination", resp, body, http.StatusOK)
	if !strings.Contains(body, "unknown customer") || !strings.Contains(body, "demo/main/evt_d1") || !strings.Contains(body, `id="pause"`) {
		t.Fatalf("the page does not show the failed attempts and the pause form:\n%s", body)
	}
	_, body = viewer.do(http.MethodGet, "/ui/destination?name=crm", nil, nil)
	if strings.Contains(body, `id="pause"`) || strings.Contains(body, `id="retry-dry-run"`) {
		t.Errorf("a viewer is shown an operator's controls:\n%s", body)
	}
	resp, body = viewer.do(http.MethodPost, "/ui/destinations/crm/pause", url.Values{"csrf": {vcsrf}, "reason": {"x"}}, nil)
	must(t, "a viewer's pause", resp, body, http.StatusForbidden)
	resp, body = ops.do(http.MethodGet, "/ui/destination?name=nope", nil, nil)
	must(t, "an unknown destination", resp, body, http.StatusNotFound)

	resp, body = ops.do(http.MethodPost, "/ui/destinations/crm/pause", url.Values{"csrf": {csrf}}, nil)
	must(t, "pause without a reason", resp, body, http.StatusBadRequest)
	resp, body = ops.do(http.MethodPost, "/ui/destinations/crm/pause", url.Values{"csrf": {csrf}, "reason": {"crm is migrating"}}, nil)
	must(t, "pause", resp, body, http.StatusSeeOther)
	_, body = ops.do(http.MethodGet, "/ui/destination?name=crm", nil, nil)
	if !strings.Contains(body, `id="state">paused`) || !strings.Contains(body, "crm is migrating") || !strings.Contains(body, `id="resume"`) {
		t.Fatalf("not shown paused with its reason and a resume form:\n%s", body)
	}
	resp, body = ops.do(http.MethodPost, "/ui/destinations/crm/resume", url.Values{"csrf": {csrf}}, nil)
	must(t, "resume", resp, body, http.StatusSeeOther)

	hook.Accept()
	resp, body = ops.do(http.MethodPost, "/ui/destinations/crm/retry", url.Values{"csrf": {csrf}}, nil)
	must(t, "retry's dry run", resp, body, http.StatusOK)
	if !strings.Contains(body, `<b>2</b> failed deliveries would be sent`) || !strings.Contains(body, `id="retry-confirm"`) {
		t.Fatalf("the dry run does not show 2 deliveries and a confirm form:\n%s", body)
	}
	if hook.Got() != 0 {
		t.Fatalf("a dry run delivered %d", hook.Got())
	}
	resp, body = ops.do(http.MethodPost, "/ui/destinations/crm/retry", url.Values{"csrf": {csrf}, "confirm": {"1"}}, nil)
	must(t, "confirm without a reason", resp, body, http.StatusBadRequest)
	resp, body = ops.do(http.MethodPost, "/ui/destinations/crm/retry", url.Values{"csrf": {csrf}, "confirm": {"1"}, "reason": {"customer created"}}, nil)
	must(t, "confirm", resp, body, http.StatusSeeOther)
	if !strings.HasPrefix(resp.Header.Get("Location"), "/ui/replays/") {
		t.Errorf("confirm went to %q, want the redelivery's page", resp.Header.Get("Location"))
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return hook.Got() == 2 }, "the retried deliveries never arrived")
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, body = ops.do(http.MethodGet, "/ui/event?key="+url.QueryEscape("demo/main/evt_d1"), nil, nil)
		return strings.Contains(body, "delivered to crm (204)")
	}, "the event's timeline never showed its delivery")
	if !strings.Contains(body, "delivery to crm failed (422 client_error)") {
		t.Errorf("the event's timeline does not show the failed attempt:\n%s", body)
	}
}
