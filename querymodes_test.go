package intake_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/processor"
	"github.com/intakehq/intake/replayer/apiclient"
)

// queryModes are pgx's query modes as postgres.url's
// default_query_exec_mode names them, and whether each works behind
// PgBouncer 1.18 in transaction mode, where consecutive statements outside
// a transaction may reach different server connections: cache_statement,
// pgx's default, prepares named statements on one and runs them on
// another ("prepared statement … does not exist"); describe_exec prepares
// the unnamed statement, syncs, and binds to it in a second exchange —
// measured: "unnamed prepared statement does not exist", or bound to
// another client's unnamed statement, answering with its rows.
// cache_describe parses again in the exchange that executes.
var queryModes = []struct {
	mode   string
	pooled bool
}{
	{"cache_statement", false},
	{"cache_describe", true},
	{"describe_exec", false},
	{"exec", true},
	{"simple_protocol", true},
}

// modesConfig is the pipeline's configuration with a GitHub integration,
// whose replay guard (a body signed without its id) has a path of its own.
const modesConfig = testConfig + `  - name: gh
    provider: github
    tenant: acme
    secrets: ["gh-secret"]
`

// TestEveryQueryMode is issue 36's pooler finding: with exec or
// simple_protocol in postgres.url nothing was processed (pgx could not
// encode a [][16]byte or a map[string]int64 without the server's parameter
// types) and replays answered 500. Each mode, directly to Postgres and —
// for the modes valid there — through PgBouncer in transaction mode, runs
// the processor end to end (a SQL handler, a conflict, the replay guard),
// a dry-run replay and a re-execution, and the purge; no batch may fail.
func TestEveryQueryMode(t *testing.T) {
	t.Parallel()
	for _, qm := range queryModes {
		t.Run(qm.mode+"/direct", func(t *testing.T) {
			t.Parallel()
			runQueryMode(t, false, func(url string) string { return withQueryMode(url, qm.mode) })
		})
		if !qm.pooled {
			continue
		}
		t.Run(qm.mode+"/pgbouncer", func(t *testing.T) {
			t.Parallel()
			b := testenv.StartPgBouncer(t, "transaction")
			runQueryMode(t, true, func(url string) string { return b.Via(t, withQueryMode(url, qm.mode)) })
		})
	}
}

func withQueryMode(url, mode string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "default_query_exec_mode=" + mode
}

func runQueryMode(t *testing.T, pooled bool, via func(string) string) {
	t.Helper()
	ctx := context.Background()
	tr := testrig.New(t, testrig.Options{Config: modesConfig, Via: via})
	if _, err := tr.DB.Exec(ctx, `CREATE TABLE payments (key text PRIMARY KEY, msg text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	tr.Config.Handlers = []config.Handler{{Name: "payments", Integrations: []string{"demo"}, Types: []string{"invoice.*"},
		SQL: `insert into payments (key, msg) values (:key, :body->'data'->>'msg') on conflict (key) do nothing`}}
	var logs testenv.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("warnings:\n%s", logs.String())
		}
	})
	app := testrig.StartApp(t, tr.Config, intake.Options{Roles: intake.Roles{Ingress: true, Processor: true, Replayer: true},
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	p := &pipeline{t: t, tr: tr, cfg: tr.Config, base: app.URL, nats: tr.Server, js: tr.JS, db: tr.DB}

	const events = 20
	for i := range events {
		id := fmt.Sprintf("evt_%d", i)
		if code, a, _ := p.post(p.sign("demo", id, demoBody(id, "paid"), time.Now())); code != http.StatusOK {
			t.Fatalf("post %s = %d %+v", id, code, a)
		}
	}
	// A conflict: evt_0 again with another payload.
	p.settled(events)
	if code, a, _ := p.post(p.sign("demo", "evt_0", demoBody("evt_0", "tampered"), time.Now())); code != http.StatusOK {
		t.Fatalf("conflicting post = %d %+v", code, a)
	}
	// The replay guard: one GitHub body, then the same body under a fresh
	// delivery id.
	gh := []byte(`{"id":"captured","amount":100}`)
	postGitHub(t, p, "orig", gh)
	tr.Settled(t, events+1, 30*time.Second)
	postGitHub(t, p, "fresh", gh)
	tr.CaughtUp(t, 60*time.Second)

	if n := tr.Count(t, `SELECT count(*) FROM payments WHERE msg = 'paid'`); n != events {
		t.Errorf("%d payment rows, want %d (the SQL handler, once per event)", n, events)
	}
	if n := tr.Count(t, `SELECT count(*) FROM intake.conflicts`); n != 1 {
		t.Errorf("%d conflicts recorded, want 1", n)
	}
	if n := tr.Count(t, `SELECT count(*) FROM intake.inbox WHERE integration = 'gh'`); n != 1 {
		t.Errorf("%d inbox rows for gh, want 1 (the copy under a fresh id is refused)", n)
	}
	out := map[string]int{}
	for _, m := range tr.Messages(t, envelope.StreamOut) {
		out[m.Header.Get(envelope.HeaderIntegration)]++
	}
	if out["gh"] != 1 || out["demo"] != 0 {
		t.Errorf("INTAKE_OUT by integration %v, want gh 1 (forwarded once) and demo 0 (handled by SQL)", out)
	}

	c := app.Client(operatorToken)
	dry, since := true, time.Now().Add(-time.Hour)
	rep, err := c.StartReplay(ctx, apiclient.ReplayRequest{Selector: apiclient.Selector{Integration: "demo", Since: &since}, DryRun: &dry})
	if err != nil {
		t.Fatalf("dry-run replay: %v", err)
	}
	if rep.Matched != events || rep.Outcomes["would_deduplicate"] != events {
		t.Errorf("dry run matched %d, outcomes %v; want %d, all would_deduplicate", rep.Matched, rep.Outcomes, events)
	}
	wet := false
	rep, err = c.StartReplay(ctx, apiclient.ReplayRequest{Selector: apiclient.Selector{Keys: []string{"demo/main/evt_1"}},
		Mode: inbox.ReplayReexecute, DryRun: &wet, Reason: "query mode test"})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if rep = testrig.WaitReplay(t, c, rep.ID, 30*time.Second); rep.State != apiclient.ReplayDone || rep.Published != 1 {
		t.Errorf("replay ended %s with %d published, want done with 1 (error %v)", rep.State, rep.Published, rep.Error)
	}
	tr.CaughtUp(t, 60*time.Second)

	st := testrig.Store(t, tr.Config.Postgres.URL, 4)
	purged, err := processor.Purge(ctx, st, tr.Config, time.Now().AddDate(1, 0, 0), "query-mode-test")
	if err != nil {
		t.Fatalf("purge: %v", err)
	}
	var inboxPurged int64
	for _, pg := range purged {
		if pg.Table == "intake.inbox" || pg.Table == "inbox" {
			inboxPurged += pg.Rows
		}
	}
	if inboxPurged != events+1 {
		t.Errorf("purge removed %d inbox rows, want %d (all, a year on): %+v", inboxPurged, events+1, purged)
	}
	if l := logs.String(); strings.Contains(l, "failed") {
		t.Errorf("warnings of failures:\n%s", l)
	}
	// The replayer's session locks do not hold behind the pooler: it says
	// so at start, with the recipe.
	if warned := strings.Contains(logs.String(), store.PoolerRecipe); warned != pooled {
		t.Errorf("replayer warned of a transaction-mode pooler: %v, want %v", warned, pooled)
	}
}

func postGitHub(t *testing.T, p *pipeline, id string, body []byte) {
	t.Helper()
	in, _ := p.cfg.Integration("gh")
	h, err := provider.SignMessage(in.Config, 0, provider.Message{ID: id, Type: "push", Body: body, Time: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if code, a, _ := p.post(delivery{integration: "gh", id: id, body: body, header: h}); code != http.StatusOK {
		t.Fatalf("post gh %s = %d %+v", id, code, a)
	}
}
