package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/replayer/apiclient"
)

const (
	cliViewer   = "viewer-token-0123456789"
	cliOperator = "operator-token-0123456789"
	// cliSecondOperator approves what cliOperator asked for.
	cliSecondOperator = "second-operator-token-0123456789"
)

// operatorRig runs processor, relay and replayer against an embedded
// nats-server and a fresh database, for the operator commands to talk to.
type operatorRig struct {
	t    *testing.T
	tr   *testrig.Rig
	base string
	js   jetstream.JetStream
	db   *pgxpool.Pool
}

func startOperatorRig(t *testing.T) *operatorRig {
	t.Helper()
	return startOperatorRigAPI(t, "")
}

// startOperatorRigAPI is startOperatorRig with more of the api section
// (indented keys, e.g. "  replays: {…}\n").
func startOperatorRigAPI(t *testing.T, api string) *operatorRig {
	t.Helper()
	tr := testrig.New(t, testrig.Options{Config: `
processor: {ack_wait: 2s}
api:
  redrive_interval: -1s # the test removes an inbox row and expects reconcile to find it
` + api + `  tokens:
    - {name: ops2, token: ` + cliSecondOperator + `, role: operator}
    - {name: viewer, token: ` + cliViewer + `, role: viewer}
    - {name: ops, token: ` + cliOperator + `, role: operator}
integrations:
  - {name: demo, provider: standard, tenant: acme, account: main, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
`, App: &intake.Options{Roles: intake.Roles{Processor: true, Replayer: true}}})
	return &operatorRig{t: t, tr: tr, base: tr.App.URL, js: tr.JS, db: tr.DB}
}

// publish puts deliveries on INTAKE_IN as ingress does and waits until the
// inbox has them all.
func (r *operatorRig) publish(ids ...string) {
	r.t.Helper()
	for _, id := range ids {
		body := []byte(fmt.Sprintf(`{"id":%q,"type":"invoice.paid"}`, id))
		msg := envelope.NewDelivery(envelope.Key{Integration: "demo", Account: "main", EventID: id}, "acme", "invoice.paid", body, time.Now()).Msg()
		if _, err := r.js.PublishMsg(context.Background(), msg); err != nil {
			r.t.Fatal(err)
		}
	}
	testenv.Eventually(r.t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox`) >= len(ids)
	}, "events never reached the inbox")
}

func (r *operatorRig) count(q string, args ...any) int {
	r.t.Helper()
	return r.tr.Count(r.t, q, args...)
}

// cli runs one intake command against the rig with stdin, returning stdout,
// stderr and the exit code main would use.
func (r *operatorRig) cli(stdin, token string, args ...string) (string, string, int) {
	r.t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetArgs(append(args, "--server", r.base, "--token", token))
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(context.Background())
	code := 0
	var ee exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case err != nil:
		code = 1
		errb.WriteString(err.Error())
	}
	return out.String(), errb.String(), code
}

func TestReplayCommand(t *testing.T) {
	t.Parallel()
	r := startOperatorRig(t)
	r.publish("evt_1", "evt_2", "evt_3")

	out, _, code := r.cli("", cliOperator, "replay", "--key", "demo/main/evt_1", "--dry-run")
	if code != 0 || !strings.Contains(out, "dry run of a exact replay") || !strings.Contains(out, "would_deduplicate") ||
		!strings.Contains(out, "demo/main/evt_1") {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}

	// A key that names no event says so (issue 34 item 7).
	out, _, code = r.cli("", cliOperator, "replay", "--key", "demo/main/evt_typo", "--dry-run")
	if code != 0 || !strings.Contains(out, "1 key has no inbox row and no refusal record") || !strings.Contains(out, "demo/main/evt_typo") {
		t.Fatalf("dry run of an unknown key: exit %d\n%s", code, out)
	}

	// Declined: nothing starts.
	_, errOut, code := r.cli("n\n", cliOperator, "replay", "--from-seq", "1", "--reason", "try")
	if code != codeError || !strings.Contains(errOut, "not started") {
		t.Fatalf("declined: exit %d\n%s", code, errOut)
	}
	if n := r.count(`SELECT count(*) FROM intake.replays WHERE NOT dry_run`); n != 0 {
		t.Fatalf("a declined replay started: %d replays", n)
	}

	// Confirmed on stdin, followed to the end, JSON for scripts.
	out, errOut, code = r.cli("y\n", cliOperator, "replay", "--from-seq", "1", "--reason", "cli test", "--rate", "1000", "-o", "json")
	var rep apiclient.Replay
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.State != apiclient.ReplayDone || rep.Published != 3 || rep.Reason != "cli test" {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "Start this replay: publish 3 messages") || !strings.Contains(errOut, "started") {
		t.Fatalf("replay did not ask and report:\n%s", errOut)
	}

	// Status of it, and the audit list.
	out, _, code = r.cli("", cliViewer, "replay", "status", rep.ID)
	if code != 0 || !strings.Contains(out, "state done") || !strings.Contains(out, "published 3") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	// What became of the copies, once the processor settled them: the
	// three events were processed, so each copy was deduplicated.
	testenv.Eventually(t, 30*time.Second, func() bool {
		out, _, code = r.cli("", cliViewer, "replay", "status", rep.ID)
		return code == 0 && strings.Contains(out, "results (settled up to seq") && strings.Contains(out, "deduplicated 3")
	}, "replay status never showed the results")
	if !strings.Contains(out, "would_deduplicate  deduplicated  3") {
		t.Fatalf("status without the results by prediction:\n%s", out)
	}
	// --watch on a replay that has ended prints it once and returns (it
	// would print again every interval while it runs); -o yaml is the
	// API's answer, for a replay and for the list, --no-headers drops the
	// list's header row.
	out, _, code = r.cli("", cliViewer, "replay", "status", "--watch", "1s", rep.ID)
	if code != 0 || strings.Count(out, "state done") != 1 {
		t.Fatalf("status --watch of a finished replay: exit %d\n%s", code, out)
	}
	out, _, code = r.cli("", cliViewer, "replay", "status", "-o", "yaml", rep.ID)
	if code != 0 || !strings.Contains(out, "state: done") || !strings.Contains(out, "id: "+rep.ID) {
		t.Fatalf("status -o yaml: exit %d\n%s", code, out)
	}
	if out, _, code = r.cli("", cliViewer, "replay", "list", "-o", "yaml"); code != 0 || !strings.Contains(out, "replays:") {
		t.Fatalf("list -o yaml: exit %d\n%s", code, out)
	}
	if out, _, code = r.cli("", cliViewer, "replay", "list", "--no-headers"); code != 0 || strings.Contains(out, "CREATED") || !strings.Contains(out, rep.ID) {
		t.Fatalf("list --no-headers: exit %d\n%s", code, out)
	}
	if _, errOut, code := r.cli("", cliViewer, "replay", "status", "--watch", "1s", "--follow", rep.ID); code == 0 ||
		!strings.Contains(errOut, "none of the others can be") {
		t.Errorf("--watch with --follow: exit %d\n%s", code, errOut)
	}
	// The audit log leaves dry runs out unless asked.
	out, _, code = r.cli("", cliViewer, "replay", "list")
	if code != 0 || !strings.Contains(out, rep.ID) || strings.Count(out, "\n") != 2 { // header; the replay
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	for _, c := range []struct {
		args []string
		rows int
	}{
		{[]string{"--dry-runs", "include"}, 5}, // two dry runs; declined dry run; dry run + replay
		{[]string{"--dry-runs", "only"}, 4},
		{[]string{"--mode", "reexecute", "--dry-runs", "include"}, 0},
		{[]string{"--state", "done", "--requested-by", "ops", "--since", "1h"}, 1},
		{[]string{"--requested-by", "viewer"}, 0},
	} {
		out, _, code = r.cli("", cliViewer, append([]string{"replay", "list"}, c.args...)...)
		if code != 0 || strings.Count(out, "\n") != 1+c.rows {
			t.Errorf("list %v: exit %d, want %d rows:\n%s", c.args, code, c.rows, out)
		}
	}
	if _, errOut, code := r.cli("", cliViewer, "replay", "list", "--state", "finished"); code != codeRefused ||
		!strings.Contains(errOut, "one of: awaiting_approval, running, done, failed, cancelled") {
		t.Errorf("list --state finished: exit %d\n%s", code, errOut)
	}

	// Partial: a key with no message to publish.
	_, errOut, code = r.cli("", cliOperator, "replay", "--key", "demo/main/nope", "--yes")
	if code != codePartial || !strings.Contains(errOut, "nothing to publish") {
		t.Fatalf("missing key: exit %d\n%s", code, errOut)
	}
	// Refused: a viewer may not replay; a reexecute needs a reason.
	if _, errOut, code = r.cli("", cliViewer, "replay", "--status", "failed", "--yes"); code != codeRefused || !strings.Contains(errOut, "403") {
		t.Fatalf("viewer replay: exit %d\n%s", code, errOut)
	}
	if _, errOut, code = r.cli("", cliOperator, "replay", "--from-seq", "1", "--mode", "reexecute", "--yes"); code != codeRefused || !strings.Contains(errOut, "reason") {
		t.Fatalf("reexecute without reason: exit %d\n%s", code, errOut)
	}
	if _, errOut, code = r.cli("", "", "replay", "--status", "failed"); code != codeError || !strings.Contains(errOut, "INTAKE_TOKEN") {
		t.Fatalf("no token: exit %d\n%s", code, errOut)
	}
}

// A re-execution above the approval ceiling is recorded, not started:
// the CLI says so and how to approve; the requester's approve is refused,
// another operator's starts it.
func TestReplayApproveCommand(t *testing.T) {
	t.Parallel()
	r := startOperatorRigAPI(t, "  replays: {reexecute_approval_above: 1}\n")
	r.publish("evt_1", "evt_2")
	out, errOut, code := r.cli("", cliOperator, "replay", "--from-seq", "1", "--mode", "reexecute", "--reason", "CRM lost both", "--yes", "-o", "json")
	var rep apiclient.Replay
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.State != apiclient.ReplayAwaitingApproval ||
		!strings.Contains(errOut, "intake replay approve "+rep.ID) {
		t.Fatalf("large re-execution: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code = r.cli("", cliOperator, "replay", "approve", rep.ID); code != codeRefused || !strings.Contains(errOut, "403") {
		t.Fatalf("approval by the requester: exit %d\n%s", code, errOut)
	}
	out, _, code = r.cli("", cliSecondOperator, "replay", "approve", rep.ID)
	if code != 0 || !strings.Contains(out, "approved by ops2") {
		t.Fatalf("approval by ops2: exit %d\n%s", code, out)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.replays WHERE id = $1 AND state = 'done' AND published = 2`, rep.ID) == 1
	}, "the approved re-execution never finished")
}

func TestRedeliverCommand(t *testing.T) {
	t.Parallel()
	r := startOperatorRig(t)
	r.publish("evt_1", "evt_2")
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.outbox_pending`) == 0
	}, "outbox never drained")
	out, errOut, code := r.cli("", cliOperator, "redeliver", "--from-seq", "1", "--yes", "--reason", "billing lost data", "--rate", "1000")
	if code != 0 || !strings.Contains(out, "redelivery") || !strings.Contains(out, "published 2") {
		t.Fatalf("redeliver: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestEventsConflictsReconcileCommands(t *testing.T) {
	t.Parallel()
	r := startOperatorRig(t)
	r.publish("evt_1", "evt_2", "evt_3")

	out, _, code := r.cli("", cliViewer, "events", "-o", "json", "--all", "--limit", "2")
	var page apiclient.EventPage
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Events) != 3 {
		t.Fatalf("events: exit %d\n%s", code, out)
	}
	out, _, code = r.cli("", cliViewer, "events", "--status", "processed")
	if code != 0 || strings.Count(out, "demo/main/evt_") != 3 || !strings.Contains(out, "KEY") {
		t.Fatalf("events table: exit %d\n%s", code, out)
	}
	out, _, code = r.cli("", cliViewer, "events", "show", "demo/main/evt_2")
	if code != 0 || !strings.Contains(out, "processed") || !strings.Contains(out, "executions") || !strings.Contains(out, "original") {
		t.Fatalf("events show: exit %d\n%s", code, out)
	}
	if _, errOut, code := r.cli("", cliViewer, "events", "show", "demo/main/nope"); code != codeRefused || !strings.Contains(errOut, "404") {
		t.Fatalf("events show unknown: exit %d\n%s", code, errOut)
	}
	// A filter that cannot match is refused naming what can (issue 34 item 7).
	for _, args := range [][]string{{"events", "--integration", "dmeo"}, {"events", "--status", "procesed"}, {"conflicts", "--integration", "dmeo"}} {
		_, errOut, code := r.cli("", cliViewer, args...)
		if code != codeRefused || !strings.Contains(errOut, "400") || !strings.Contains(errOut, "one of: ") {
			t.Errorf("%v: exit %d, want %d and the allowed values:\n%s", args, code, codeRefused, errOut)
		}
	}
	out, _, code = r.cli("", cliViewer, "events", "--since", "2d")
	if code != 0 || strings.Count(out, "demo/main/evt_") != 3 {
		t.Fatalf("events --since 2d: exit %d\n%s", code, out)
	}
	out, _, code = r.cli("", cliViewer, "conflicts")
	if code != 0 || !strings.Contains(out, "CONFLICTING SHA256") {
		t.Fatalf("conflicts: exit %d\n%s", code, out)
	}

	out, _, code = r.cli("", cliViewer, "reconcile", "--from-seq", "1")
	if code != 0 || !strings.Contains(out, "checked 3 messages") || !strings.Contains(out, "0 missing") {
		t.Fatalf("reconcile clean: exit %d\n%s", code, out)
	}
	if _, err := r.db.Exec(context.Background(), `DELETE FROM intake.inbox WHERE event_id = 'evt_2'`); err != nil {
		t.Fatal(err)
	}
	out, _, code = r.cli("", cliViewer, "reconcile", "--since", "1h")
	if code != codePartial || !strings.Contains(out, "demo/main/evt_2") ||
		!strings.Contains(out, "intake replay --from-seq 2 --to-seq 2 --key demo/main/evt_2") {
		t.Fatalf("reconcile with a lost row: exit %d\n%s", code, out)
	}
}
