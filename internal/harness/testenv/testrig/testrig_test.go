package testrig_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	viewer   = "viewer-token-0123456789"
	operator = "operator-token-0123456789"
	config   = `
processor: {ack_wait: 2s}
outbox: {poll_interval: 100ms}
api:
  tokens:
    - {name: viewer, token: ` + viewer + `, role: viewer}
    - {name: ops, token: ` + operator + `, role: operator}
integrations:
  - {name: demo, provider: standard, tenant: acme, account: main, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
`
)

func TestDatabaseIsMigratedAndPrivate(t *testing.T) {
	t.Parallel()
	a, b := testrig.Database(t), testrig.Database(t)
	if a == b {
		t.Fatalf("two tests' databases share the URL %s", a)
	}
	st := testrig.Store(t, a, 2)
	if err := store.CheckMigrated(context.Background(), st); err != nil {
		t.Fatalf("copy of the template: %v", err)
	}
	if _, err := st.Pool().Exec(context.Background(), `CREATE TABLE mine (v int)`); err != nil {
		t.Fatal(err)
	}
	var n int
	err := testrig.Store(t, b, 2).Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM pg_tables WHERE tablename = 'mine'`).Scan(&n)
	if err != nil || n != 0 {
		t.Fatalf("a table made in one copy is in the other: n=%d err=%v", n, err)
	}
}

func TestAppAndClient(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Config: config, App: &intake.Options{Roles: intake.Roles{Processor: true, Replayer: true}}})
	k := envelope.Key{Integration: "demo", Account: "main", EventID: "evt_1"}
	r.Publish(t, envelope.NewDelivery(k, "acme", "invoice.paid", []byte(`{"id":"evt_1"}`), time.Now()).Msg())
	r.Settled(t, 1, 30*time.Second)
	r.CaughtUp(t, 30*time.Second)

	ctx := context.Background()
	c := r.App.Client(viewer)
	page, err := c.Events(ctx, apiclient.EventQuery{Status: "processed"})
	if err != nil || len(page.Events) != 1 || page.Events[0].EventID != "evt_1" {
		t.Fatalf("events = %+v, %v", page, err)
	}
	ev, err := c.Event(ctx, "demo", "evt_1")
	if err != nil || ev.Status != "processed" || len(ev.Executions) != 1 {
		t.Fatalf("event = %+v, %v", ev, err)
	}
	if _, err := c.Event(ctx, "demo", "nope"); apiclient.StatusCode(err) != http.StatusNotFound {
		t.Fatalf("unknown event: %v, want 404", err)
	}
	res, err := c.Reconcile(ctx, apiclient.ReconcileQuery{FromSeq: 1})
	if err != nil || res.Checked != 1 || len(res.Missing) != 0 {
		t.Fatalf("reconcile = %+v, %v", res, err)
	}
	no := false
	req := apiclient.ReplayRequest{Selector: apiclient.Selector{Keys: []string{k.String()}}, DryRun: &no}
	if _, err := c.StartReplay(ctx, req); apiclient.StatusCode(err) != http.StatusForbidden {
		t.Fatalf("viewer replay: %v, want 403", err)
	}
	ops := r.App.Client(operator)
	rep, err := ops.StartReplay(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if rep = testrig.WaitReplay(t, ops, rep.ID, 30*time.Second); rep.State != apiclient.ReplayDone || rep.Published != 1 {
		t.Fatalf("replay = %+v", rep)
	}
	list, err := c.Replays(ctx, apiclient.ReplayQuery{})
	if err != nil || len(list.Replays) != 1 || list.Replays[0].ID != rep.ID {
		t.Fatalf("replays = %+v, %v", list, err)
	}
	if _, err := ops.CancelReplay(ctx, rep.ID); apiclient.StatusCode(err) != http.StatusConflict {
		t.Fatalf("cancel a finished replay: %v, want 409", err)
	}
	if conf, err := c.Conflicts(ctx, apiclient.ConflictQuery{}); err != nil || len(conf.Conflicts) != 0 {
		t.Fatalf("conflicts = %+v, %v", conf, err)
	}
}
