package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/processor"
	"github.com/intakehq/intake/replayer/apiclient"
)

// TestRetryingEventInTheCLI (issue 34 items 1 and 3): an event whose
// handler failed and waits a minute for its next attempt is retrying in
// `intake events show` (attempt n of max, the next attempt, each attempt's
// error), listed by `intake events --status retrying`, and counted by
// `intake status` — with no inbox row.
func TestRetryingEventInTheCLI(t *testing.T) {
	t.Parallel()
	flaky := func(next processor.Handler) processor.Handler {
		return processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
			if ev.Key.EventID == "evt_flaky" {
				return nil, errors.New("billing API answered 503")
			}
			return next.Handle(ctx, tx, ev)
		})
	}
	tr := testrig.New(t, testrig.Options{Config: `
processor: {ack_wait: 2s, max_deliver: 3, backoff: [1m]}
api:
  redrive_interval: -1s
  tokens:
    - {name: viewer, token: ` + cliViewer + `, role: viewer}
integrations:
  - {name: demo, provider: standard, tenant: acme, account: main, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
  - {name: shop, provider: standard, tenant: acme, account: main, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
`, App: &intake.Options{Roles: intake.Roles{Processor: true, Replayer: true}, Middleware: []processor.Middleware{flaky}}})
	r := &operatorRig{t: t, tr: tr, base: tr.App.URL, js: tr.JS, db: tr.DB}
	msg := envelope.NewDelivery(envelope.Key{Integration: "demo", Account: "main", EventID: "evt_flaky"}, "acme", "invoice.paid",
		[]byte(`{"id":"evt_flaky","type":"invoice.paid"}`), time.Now()).Msg()
	if _, err := r.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}

	// Another integration's event after it, processed: above the ack
	// floor the retrying message holds, so past it too.
	msg = envelope.NewDelivery(envelope.Key{Integration: "shop", Account: "main", EventID: "evt_ok"}, "acme", "invoice.paid",
		[]byte(`{"id":"evt_ok","type":"invoice.paid"}`), time.Now()).Msg()
	if _, err := r.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return r.count(`SELECT count(*) FROM intake.inbox`) == 1 }, "shop's event never processed")

	var out, errOut string
	var code int
	testenv.Eventually(t, 30*time.Second, func() bool {
		out, errOut, code = r.cli("", cliViewer, "events", "show", "demo/main/evt_flaky")
		return code == 0
	}, "events show never found the failing event")
	for _, want := range []string{"retrying", "1 of 3", "next attempt", "no inbox row until it succeeds", "failed attempts",
		"billing API answered 503"} {
		if !strings.Contains(out, want) {
			t.Errorf("events show lacks %q:\n%s%s", want, out, errOut)
		}
	}
	if n := r.count(`SELECT count(*) FROM intake.inbox WHERE event_id = 'evt_flaky'`); n != 0 {
		t.Errorf("a retrying event has %d inbox rows: the inbox holds decisions only", n)
	}
	if out, errOut, code = r.cli("", cliViewer, "events", "--status", "retrying"); code != 0 || !strings.Contains(out, "demo/main/evt_flaky") {
		t.Errorf("events --status retrying: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = r.cli("", cliViewer, "status", "-o", "json")
	var s apiclient.Status
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || len(s.Integrations) != 2 || s.Integrations[0].Retrying != 1 {
		t.Fatalf("status while retrying: exit %d\n%s%s", code, out, errOut)
	}
	// Each integration's backlog is its own subjects' (the stream's is 2):
	// demo's retrying message, and shop's processed one above the floor.
	for _, x := range s.Integrations {
		if x.Backlog == nil || *x.Backlog != 1 || x.OldestUnprocessedAt == nil {
			t.Errorf("status: %s backlog %v, oldest %v; want 1 each", x.Name, x.Backlog, x.OldestUnprocessedAt)
		}
	}
}
