package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestOpenCaseOnce runs the example's handler in a real processor: a ticket
// delivered twice (a provider retry past the stream window) opens one case
// and schedules one notification; an unreadable ticket fails visibly.
func TestOpenCaseOnce(t *testing.T) {
	ctx := context.Background()
	r := testrig.New(t, testrig.Options{MaxConns: 4,
		Mutate: func(c *config.Config) {
			c.NATS.Stream = config.Stream{Replicas: 1, MaxAge: time.Hour, DuplicateWindow: time.Minute, MaxBytes: -1}
		}})
	st, js := r.Store, r.JS
	if _, err := st.Pool().Exec(ctx, schema); err != nil {
		t.Fatal(err)
	}
	publish := func(id, body, msgID string) {
		m := envelope.NewDelivery(envelope.Key{Integration: "partner", EventID: id}, "acme", "ticket.opened", []byte(body), time.Now()).Msg()
		if msgID != "" {
			m.Header.Set(envelope.HeaderMsgID, msgID)
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	publish("t_1", `{"customer":"cus_9","subject":"Printer on fire"}`, "")
	publish("t_1", `{"customer":"cus_9","subject":"Printer on fire"}`, "retry-past-window")
	publish("t_2", `not json`, "")

	p, err := processor.New(processor.Options{Store: st, JS: js, Integrations: []config.Integration{{Name: "partner", Tenant: "acme"}}, Handler: processor.NewRouter().On("ticket.opened", processor.HandlerFunc(OpenCase)),
		Config: config.Processor{AckWait: 5 * time.Second, MaxDeliver: 3, Concurrency: 1}, Metrics: telemetry.NewMetrics()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = p.Run(runCtx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	count := func(q string) int { return r.Count(t, q) }
	testenv.Eventually(t, 30*time.Second, func() bool {
		return count(`SELECT count(*) FROM intake.inbox`) == 2 && count(`SELECT delivery_count FROM intake.inbox WHERE event_id = 't_1'`) == 2
	}, "tickets never settled")
	if c := count(`SELECT count(*) FROM support.cases`); c != 1 {
		t.Fatalf("%d support cases, want 1", c)
	}
	if c := count(`SELECT count(*) FROM support.jobs WHERE operation_key = 'notify:partner//t_1'`); c != 1 {
		t.Fatalf("%d notification jobs with the stable key, want 1", c)
	}
	if c := count(`SELECT count(*) FROM intake.inbox WHERE event_id = 't_2' AND status = 'failed'`); c != 1 {
		t.Fatal("unreadable ticket not marked failed")
	}
}
