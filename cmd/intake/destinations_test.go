package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/replayer/apiclient"
)

// TestDestinationsCommand (issue 32 item 4): the destinations list and
// detail, a failed delivery in the delivery log, pause and resume (a
// reason required, operators only), and retry of the failed deliveries
// through a redelivery to the destination only.
func TestDestinationsCommand(t *testing.T) {
	t.Parallel()
	hook := testrig.NewReceiver(t, http.StatusNotFound, "no such account", http.StatusOK)
	tr := testrig.New(t, testrig.Options{Config: `
processor: {ack_wait: 2s}
api:
  redrive_interval: -1s
  tokens:
    - {name: viewer, token: ` + cliViewer + `, role: viewer}
    - {name: ops, token: ` + cliOperator + `, role: operator}
integrations:
  - {name: demo, provider: standard, tenant: acme, account: main, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
destinations:
  - {name: crm, url: "` + hook.URL + `/in", secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], retry: [50ms]}
`, App: &intake.Options{Roles: intake.Roles{Processor: true, Replayer: true, Dispatcher: true}}})
	r := &operatorRig{t: t, tr: tr, base: tr.App.URL, js: tr.JS, db: tr.DB}
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, err := tr.JS.Consumer(context.Background(), envelope.StreamOut, "dispatch-crm")
		return err == nil
	}, "no dispatcher consumer")
	for i := range 2 {
		id := fmt.Sprintf("evt_d%d", i)
		msg := envelope.NewDelivery(envelope.Key{Integration: "demo", Account: "main", EventID: id}, "acme", "demo.created",
			fmt.Appendf(nil, `{"id":%q}`, id), time.Now()).Msg()
		if _, err := tr.JS.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.dispatch_attempts WHERE outcome = 'failed'`) == 2
	}, "the refused deliveries were never recorded failed")

	out, _, code := r.cli("", cliViewer, "destinations")
	if code != 0 || !strings.Contains(out, "crm") || !strings.Contains(out, "failing") || !strings.Contains(out, "failed 404") {
		t.Fatalf("destinations: exit %d\n%s", code, out)
	}
	out, _, code = r.cli("", cliViewer, "destinations", "attempts", "crm", "--outcome", "failed", "-o", "json")
	var page apiclient.DispatchAttemptPage
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Attempts) != 2 || !strings.Contains(page.Attempts[0].Response, "no such account") {
		t.Fatalf("attempts: exit %d\n%s", code, out)
	}
	if _, _, code := r.cli("", cliViewer, "destinations", "attempts", "crm", "--outcome", "delivered"); code != codeError {
		t.Errorf("attempts matching nothing: exit %d, want %d", code, codeError)
	}
	if _, errOut, code := r.cli("", cliViewer, "destinations", "attempts", "crm", "--outcome", "lost"); code != codeRefused ||
		!strings.Contains(errOut, "one of: delivered, retry, failed") {
		t.Errorf("an unknown outcome: exit %d %s", code, errOut)
	}
	if _, errOut, code := r.cli("", cliOperator, "destinations", "pause", "crm"); code != codeRefused || !strings.Contains(errOut, "reason: required") {
		t.Errorf("pause without a reason: exit %d %s", code, errOut)
	}
	if _, errOut, code := r.cli("", cliViewer, "destinations", "pause", "crm", "--reason", "x"); code != codeRefused || !strings.Contains(errOut, "403") {
		t.Errorf("a viewer's pause: exit %d %s", code, errOut)
	}
	if out, _, code := r.cli("", cliOperator, "destinations", "pause", "crm", "--reason", "crm down for maintenance"); code != 0 || !strings.Contains(out, "crm: paused") {
		t.Fatalf("pause: exit %d %s", code, out)
	}
	out, _, code = r.cli("", cliViewer, "destinations", "show", "crm")
	if code != 0 || !strings.Contains(out, "crm down for maintenance") || !strings.Contains(out, "pause") || !strings.Contains(out, "evt_d") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	if out, _, code := r.cli("", cliOperator, "destinations", "resume", "crm"); code != 0 || !strings.Contains(out, "crm: failing") {
		t.Fatalf("resume: exit %d %s", code, out)
	}
	hook.Accept()
	out, _, code = r.cli("", cliOperator, "destinations", "retry", "crm", "--reason", "account created", "--yes")
	if code != 0 || !strings.Contains(out, "would_redeliver") {
		t.Fatalf("retry: exit %d\n%s", code, out)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return hook.Got() == 2 }, "the retried deliveries never arrived")
	if out, _, code := r.cli("", cliOperator, "destinations", "retry", "nope", "--dry-run"); code != codeRefused {
		t.Errorf("retry of an unknown destination: exit %d %s", code, out)
	}
}
