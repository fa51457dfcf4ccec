package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/dev"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/processor"
	"github.com/intakehq/intake/replayer/apiclient"
)

// TestFailuresAsWorkItems (issue 34 item 5): failed and quarantined events
// are grouped by cause with counts; an operator resolves a group with a
// note (audited); a new failure of the same cause reopens it.
func TestFailuresAsWorkItems(t *testing.T) {
	t.Parallel()
	tr := testrig.New(t, testrig.Options{Config: `
processor: {ack_wait: 2s}
api:
  redrive_interval: -1s
  tokens:
    - {name: viewer, token: ` + cliViewer + `, role: viewer}
    - {name: ops, token: ` + cliOperator + `, role: operator}
integrations:
  - {name: demo, provider: standard, tenant: acme, account: main, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
`, App: &intake.Options{Roles: intake.Roles{Processor: true, Replayer: true}, Middleware: []processor.Middleware{dev.DemoFailures()}}})
	r := &operatorRig{t: t, tr: tr, base: tr.App.URL, js: tr.JS, db: tr.DB}
	send := func(id, typ string) {
		body := []byte(fmt.Sprintf(`{"id":%q,"type":%q}`, id, typ))
		msg := envelope.NewDelivery(envelope.Key{Integration: "demo", Account: "main", EventID: id}, "acme", typ, body, time.Now()).Msg()
		if _, err := r.js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		send(fmt.Sprintf("evt_f%d", i), dev.DemoFailType)
	}
	send("evt_q1", dev.DemoQuarantineType)
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status IN ('failed', 'quarantined')`) == 4
	}, "the demo failures were never recorded")

	groups := func(args ...string) []apiclient.FailureGroup {
		t.Helper()
		out, errOut, code := r.cli("", cliViewer, append([]string{"failures", "-o", "json"}, args...)...)
		var l apiclient.FailureGroupList
		if code != 0 || json.Unmarshal([]byte(out), &l) != nil {
			t.Fatalf("failures %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return l.Groups
	}
	gs := groups()
	if len(gs) != 2 {
		t.Fatalf("%d groups, want 2 (failed, quarantined): %+v", len(gs), gs)
	}
	var failed apiclient.FailureGroup
	for _, g := range gs {
		switch g.Status {
		case "failed":
			failed = g
			if g.Events != 3 || g.ErrorClass != "permanent" || len(g.SampleKeys) != 3 || !strings.Contains(g.Signature, "demo.fail fails on purpose") {
				t.Errorf("failed group = %+v", g)
			}
		case "quarantined":
			if g.Events != 1 || g.ErrorClass != "quarantine" {
				t.Errorf("quarantined group = %+v", g)
			}
		}
	}
	out, _, code := r.cli("", cliViewer, "failures")
	if code != 0 || !strings.Contains(out, failed.ID) || !strings.Contains(out, "SIGNATURE") {
		t.Fatalf("failures table: exit %d\n%s", code, out)
	}

	// A viewer may not resolve; a resolution needs a note.
	if _, errOut, code := r.cli("", cliViewer, "failures", "resolve", failed.ID, "--note", "x"); code != codeRefused || !strings.Contains(errOut, "403") {
		t.Errorf("viewer resolve: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := r.cli("", cliOperator, "failures", "resolve", failed.ID); code != codeRefused || !strings.Contains(errOut, "note: required") {
		t.Errorf("resolve without a note: exit %d\n%s", code, errOut)
	}
	out, errOut, code := r.cli("", cliOperator, "failures", "resolve", failed.ID, "--note", "fixed the tax-id check; replayed")
	if code != 0 || !strings.Contains(out, "resolved "+failed.ID+": 3 failed events of demo (permanent) by ops") {
		t.Fatalf("resolve: exit %d\n%s%s", code, out, errOut)
	}
	if gs := groups(); len(gs) != 1 || gs[0].Status != "quarantined" {
		t.Errorf("after the resolution, open groups = %+v; want the quarantined one", gs)
	}
	all := groups("--all")
	if len(all) != 2 {
		t.Fatalf("--all: %+v", all)
	}
	if n := r.count(`SELECT count(*) FROM intake.failure_resolutions WHERE resolved_by = 'ops' AND events = 3 AND note LIKE 'fixed%'`); n != 1 {
		t.Errorf("%d resolution records, want 1 (audited)", n)
	}

	// The same cause again: the group is open again, its resolution kept.
	send("evt_f4", dev.DemoFailType)
	testenv.Eventually(t, 30*time.Second, func() bool {
		for _, g := range groups() {
			if g.ID == failed.ID && g.Events == 4 && !g.Resolved && g.ResolvedBy != nil && *g.ResolvedBy == "ops" {
				return true
			}
		}
		return false
	}, "a new failure of a resolved group did not reopen it")
}
