package intake_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/processor"
)

// TestSQLHandlersFromTheConfig: the stock app runs the file's handlers:
// a payment row once per event across a provider's retry, and an event no
// handler matches forwarded as without handlers.
func TestSQLHandlersFromTheConfig(t *testing.T) {
	t.Parallel()
	tr := testrig.New(t, testrig.Options{Config: testConfig})
	if _, err := tr.DB.Exec(context.Background(), `CREATE TABLE payments (key text PRIMARY KEY, msg text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	tr.Config.Handlers = []config.Handler{{Name: "payments", Integrations: []string{"demo"}, Types: []string{"invoice.*"},
		SQL: `insert into payments (key, msg) values (:key, :body->'data'->>'msg')`}}
	app := testrig.StartApp(t, tr.Config, intake.Options{Roles: intake.Roles{Ingress: true, Processor: true, Replayer: true}})
	p := &pipeline{t: t, tr: tr, cfg: tr.Config, base: app.URL, nats: tr.Server, js: tr.JS, db: tr.DB}

	d := p.sign("demo", "evt_pay", demoBody("evt_pay", "forty-two"), time.Now())
	for range 2 {
		if code, a, _ := p.post(d); code != http.StatusOK {
			t.Fatalf("post = %d %+v", code, a)
		}
	}
	other := p.sign("demo", "evt_cust", []byte(`{"id":"evt_cust","type":"customer.created"}`), time.Now())
	if code, a, _ := p.post(other); code != http.StatusOK {
		t.Fatalf("post = %d %+v", code, a)
	}
	p.settled(2)
	tr.CaughtUp(t, 30*time.Second)
	if n := tr.Count(t, `SELECT count(*) FROM payments WHERE key = 'demo/main/evt_pay' AND msg = 'forty-two'`); n != 1 {
		t.Fatalf("%d payment rows, want 1", n)
	}
	if n := tr.Count(t, `SELECT count(*) FROM payments`); n != 1 {
		t.Fatalf("%d payment rows in all, want 1", n)
	}
	out := p.outMessages()
	if len(out) != 1 || len(out["demo/main/evt_cust"]) != 1 {
		t.Fatalf("INTAKE_OUT holds %v; want the unmatched event forwarded, the handled one not", keysOf(out))
	}
}

func keysOf[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestSQLHandlersRefuseTheStart: a statement that does not prepare refuses
// the processor's start naming the handler and Postgres's message, and so
// does a file with handlers in a program with a Go handler of its own.
func TestSQLHandlersRefuseTheStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		h       config.Handler
		handler processor.Handler
		want    []string
	}{
		{"syntax error", config.Handler{Name: "typo", SQL: "inser into payments values (:key)"}, nil, []string{"handler typo", "syntax error"}},
		{"unknown table", config.Handler{Name: "notable", SQL: "insert into nowhere values (:key)"}, nil, []string{"handler notable", `"nowhere" does not exist`}},
		{"Go handler too", config.Handler{Name: "ok", SQL: "select 1"}, processor.Forward(), []string{"Options.Handler", "processor.SQLRouter"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := testrig.New(t, testrig.Options{Config: testConfig})
			tr.Config.Handlers = []config.Handler{tt.h}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := intake.Run(ctx, tr.Config, intake.Options{Roles: intake.Roles{Processor: true}, HTTPAddr: "127.0.0.1:0", Handler: tt.handler})
			if err == nil {
				t.Fatal("started")
			}
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
