package processor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/faults"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

// sqlRig is a rig with a payments table and the SQL handlers hs built
// against its database.
func sqlRig(t *testing.T, hs ...config.Handler) (*rig, processor.Handler) {
	t.Helper()
	r := setup(t, "")
	ctx := context.Background()
	if _, err := r.db.Exec(ctx, `CREATE TABLE payments (key text PRIMARY KEY, amount int NOT NULL, execution_id text, mode text);
		CREATE FUNCTION apply_payment(body jsonb, k text) RETURNS TABLE (type text, payload jsonb) LANGUAGE plpgsql AS $$
		BEGIN
		  IF body->>'amount' = 'nope' THEN RAISE EXCEPTION 'amount refused' USING ERRCODE = 'IK001'; END IF;
		  IF body->>'amount' = 'look' THEN RAISE EXCEPTION 'needs a look' USING ERRCODE = 'IK002'; END IF;
		  INSERT INTO payments (key, amount) VALUES (k, (body->>'amount')::int);
		  RETURN QUERY SELECT 'payment.applied'::text, jsonb_build_object('key', k, 'amount', (body->>'amount')::int);
		END $$;`); err != nil {
		t.Fatal(err)
	}
	h, err := processor.SQLRouter(ctx, r.db, hs)
	if err != nil {
		t.Fatal(err)
	}
	return r, h
}

// TestSQLHandlerAppliesOncePerEvent: a queued one-INSERT handler applies an
// event once across a duplicate in the stream and a redelivery after a
// crash between commit and ack.
func TestSQLHandlerAppliesOncePerEvent(t *testing.T) {
	t.Parallel()
	r, h := sqlRig(t, config.Handler{Name: "payments",
		SQL: `insert into payments (key, amount, execution_id, mode) values (:key, (:body->>'amount')::int, :execution_id, :mode)`})
	m := telemetry.NewMetrics()
	crashed := make(chan struct{})
	var once sync.Once
	stopA := r.runWith(faults.Hooks{AfterCommit: func() error {
		once.Do(func() { close(crashed) })
		return errors.New("simulated crash: the ack is never sent")
	}}, processor.Options{Metrics: m, Handler: h})
	r.publish("evt_pay", `{"amount": 42}`, "")
	<-crashed
	stopA()
	r.publish("evt_pay", `{"amount": 42}`, "another-msg-id") // the provider sent it again
	r.run(processor.Options{Metrics: m, Handler: h})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return testutil.ToFloat64(m.Processed.WithLabelValues("demo", "redelivered")) >= 1 &&
			testutil.ToFloat64(m.Processed.WithLabelValues("demo", "duplicate")) >= 1
	}, "the redelivery and the duplicate were never processed")
	r.settled(1)
	if n := r.count(`SELECT count(*) FROM payments WHERE key = $1 AND amount = 42 AND mode = 'original' AND execution_id <> ''`, key("evt_pay").String()); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM payments`); n != 1 {
		t.Fatalf("%d payments in all, want 1", n)
	}
	// No payload column: the event is not forwarded (forward: false).
	if n := r.count(`SELECT count(*) FROM intake.outbox`); n != 0 {
		t.Fatalf("%d outbox rows, want none", n)
	}
}

// TestSQLHandlerErrorsAndOutputs: IK001 fails the event, IK002 quarantines
// it, returned rows become INTAKE_OUT messages, a body that is not JSON
// fails permanently, and an event no handler matches is forwarded.
func TestSQLHandlerErrorsAndOutputs(t *testing.T) {
	t.Parallel()
	r, h := sqlRig(t, config.Handler{Name: "pay", Types: []string{"thing.*"}, Integrations: []string{"demo"},
		SQL: `select * from apply_payment(:body, :key)`, Forward: true})
	r.publish("evt_ok", `{"amount": 7}`, "")
	r.publish("evt_nope", `{"amount": "nope"}`, "")
	r.publish("evt_look", `{"amount": "look"}`, "")
	r.publish("evt_notjson", `amount=7`, "")
	r.publish("evt_nul", `{"amount": "\u0000"}`, "")
	r.run(processor.Options{Handler: h, Config: config.Processor{AckWait: 2 * time.Second, MaxDeliver: 5, Concurrency: 1}})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status <> 'processing'`) == 5
	}, "events never settled")
	for id, want := range map[string]string{"evt_ok": "processed", "evt_nope": "failed", "evt_look": "quarantined", "evt_notjson": "failed", "evt_nul": "failed"} {
		var status, errText string
		if err := r.db.QueryRow(context.Background(), `SELECT status, coalesce(error, '') FROM intake.inbox WHERE event_id = $1`, id).Scan(&status, &errText); err != nil {
			t.Fatal(err)
		}
		if status != want {
			t.Errorf("%s: status %s (%s), want %s", id, status, errText, want)
		}
		if id == "evt_nope" && !strings.Contains(errText, "amount refused") {
			t.Errorf("%s: error %q does not say the function's message", id, errText)
		}
		if id == "evt_nul" && !strings.Contains(errText, `\u0000`) {
			t.Errorf("%s: error %q does not say why", id, errText)
		}
		if id == "evt_notjson" && !strings.Contains(errText, "not valid JSON") {
			t.Errorf("%s: error %q does not say why", id, errText)
		}
	}
	if n := r.count(`SELECT count(*) FROM payments`); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
	r.tr.CaughtUp(t, 30*time.Second)
	ctx := context.Background()
	testenv.Eventually(t, 30*time.Second, func() bool { return len(r.outCount()) == 1 }, "nothing on INTAKE_OUT")
	cons, err := r.js.OrderedConsumer(ctx, envelope.StreamOut, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for range 2 {
		msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, msg.Subject())
		if msg.Subject() == envelope.SubjectOut("acme", "demo", "payment.applied") {
			var p struct{ Amount int }
			if err := json.Unmarshal(msg.Data(), &p); err != nil || p.Amount != 7 {
				t.Errorf("payload %s: %v", msg.Data(), err)
			}
			if msg.Headers().Get(envelope.HeaderKey) != key("evt_ok").String() {
				t.Errorf("headers %v lack the identity", msg.Headers())
			}
		}
	}
	if want := envelope.SubjectOut("acme", "demo", "payment.applied") + " " + envelope.SubjectOut("acme", "demo", "thing.happened"); strings.Join(subjects, " ") != want {
		t.Errorf("INTAKE_OUT subjects %v, want the row's message then the forward", subjects)
	}
}

// TestSQLHandlerQueuedIK001FailsTheEvent: a queued statement's IK001 fails
// its event permanently, once the batch split isolates it.
func TestSQLHandlerQueuedIK001FailsTheEvent(t *testing.T) {
	t.Parallel()
	r, _ := sqlRig(t)
	ctx := context.Background()
	if _, err := r.db.Exec(ctx, `CREATE FUNCTION refuse(body jsonb) RETURNS void LANGUAGE plpgsql AS $$
		BEGIN IF body->>'amount' = 'nope' THEN RAISE EXCEPTION 'amount refused' USING ERRCODE = 'IK001'; END IF; END $$`); err != nil {
		t.Fatal(err)
	}
	h, err := processor.SQLRouter(ctx, r.db, []config.Handler{{Name: "refuse", SQL: `select refuse(:body)`}})
	if err != nil {
		t.Fatal(err)
	}
	r.publish("evt_1", `{"amount": 1}`, "")
	r.publish("evt_nope", `{"amount": "nope"}`, "")
	r.run(processor.Options{Handler: h, Config: config.Processor{AckWait: 2 * time.Second, MaxDeliver: 5, Concurrency: 1}})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'failed' AND attempts = 1`) == 1 &&
			r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'processed'`) == 1
	}, "the IK001 event was not failed at its first delivery")
}

// TestSQLHandlerFailuresNameTheHandler: a SQL handler's retries and its
// permanent failure carry its name, in the processor's log lines, as the
// handler label of intake_processor_failures_total and in the event's
// recorded error — a queued statement's too, whose error Postgres raises
// with the batch's writes.
func TestSQLHandlerFailuresNameTheHandler(t *testing.T) {
	t.Parallel()
	r, _ := sqlRig(t)
	ctx := context.Background()
	if _, err := r.db.Exec(ctx, `CREATE FUNCTION flaky(body jsonb) RETURNS void LANGUAGE plpgsql AS $$
		BEGIN
		  IF body->>'amount' = 'nope' THEN RAISE EXCEPTION 'amount refused' USING ERRCODE = 'IK001'; END IF;
		  IF body->>'amount' = 'later' THEN RAISE EXCEPTION 'ledger busy'; END IF;
		END $$`); err != nil {
		t.Fatal(err)
	}
	h, err := processor.SQLRouter(ctx, r.db, []config.Handler{{Name: "ledger", SQL: `select flaky(:body)`}})
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.Buffer
	m := telemetry.NewMetrics()
	r.publish("evt_nope", `{"amount": "nope"}`, "")
	r.publish("evt_later", `{"amount": "later"}`, "")
	r.run(processor.Options{Handler: h, Metrics: m, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Config: config.Processor{AckWait: 2 * time.Second, MaxDeliver: 2, Concurrency: 1}})
	testenv.Eventually(t, 60*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'failed'`) == 2
	}, "the events were not failed")
	if n := testutil.ToFloat64(m.Failures.WithLabelValues("demo", "retry", "ledger")); n != 1 {
		t.Errorf("failures_total{kind=retry, handler=ledger} = %v, want 1 (the retryable error's first delivery)", n)
	}
	if n := testutil.ToFloat64(m.Failures.WithLabelValues("demo", "failed", "ledger")); n != 2 {
		t.Errorf("failures_total{kind=failed, handler=ledger} = %v, want 2", n)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "handler failed") && !strings.Contains(line, "handler=ledger") {
			t.Errorf("log line does not name the handler: %s", line)
		}
	}
	var errText string
	if err := r.db.QueryRow(ctx, `SELECT error FROM intake.inbox WHERE event_id = 'evt_nope'`).Scan(&errText); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errText, "handler ledger") || !strings.Contains(errText, "amount refused") {
		t.Errorf("the failed event's error %q does not name the handler and say the function's message", errText)
	}
	if !strings.Contains(logs.String(), "handler failed; will retry") {
		t.Errorf("no retry logged:\n%s", logs.String())
	}
}

// TestSQLHandlerRefusesToStart: a bad statement, an unknown parameter or a
// role with rights on intake refuses the start naming the handler.
func TestSQLHandlerRefusesToStart(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	ctx := context.Background()
	// Roles are the cluster's, shared by every test database: names of
	// this run's own.
	sfx := fmt.Sprintf("_%d", time.Now().UnixNano()%1e9)
	snoop, reader, writer := "sqlh_snoop"+sfx, "sqlh_reader"+sfx, "sqlh_writer"+sfx
	if _, err := r.db.Exec(ctx, fmt.Sprintf(`CREATE ROLE %[1]s NOLOGIN; GRANT USAGE ON SCHEMA intake TO %[1]s;
		CREATE ROLE %[2]s NOLOGIN; GRANT SELECT ON intake.inbox TO %[2]s;
		CREATE ROLE %[3]s NOLOGIN; GRANT %[3]s TO CURRENT_USER;
		CREATE TABLE sqlh_pay (key text, who text DEFAULT current_user); GRANT INSERT ON sqlh_pay TO %[3]s`, snoop, reader, writer)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = r.db.Exec(context.Background(), fmt.Sprintf(`DROP TABLE sqlh_pay; REVOKE ALL ON ALL TABLES IN SCHEMA intake FROM %[2]s; REVOKE ALL ON SCHEMA intake FROM %[1]s;
			DROP ROLE %[1]s; DROP ROLE %[2]s; DROP ROLE %[3]s`, snoop, reader, writer))
	})
	tests := []struct {
		name string
		h    config.Handler
		want []string
	}{
		{"syntax", config.Handler{Name: "typo", SQL: "selec :key"}, []string{"handler typo", "syntax error"}},
		{"unknown function", config.Handler{Name: "nofn", SQL: "select no_such_fn(:key)"}, []string{"handler nofn", "no_such_fn"}},
		{"unknown parameter", config.Handler{Name: "param", SQL: "select :bodyy"}, []string{"handler param", ":bodyy"}},
		{"type without payload", config.Handler{Name: "shape", SQL: "select 'a' as type"}, []string{"handler shape", "payload"}},
		{"no such role", config.Handler{Name: "norole", SQL: "select 1", Role: "sqlh_nobody"}, []string{"handler norole", "no such role"}},
		{"role on the schema", config.Handler{Name: "snoop", SQL: "select 1", Role: snoop}, []string{"handler snoop", "schema intake"}},
		{"role on a table", config.Handler{Name: "reader", SQL: "select 1", Role: reader}, []string{"handler reader", "intake.inbox"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := processor.SQLRouter(ctx, r.db, []config.Handler{tt.h})
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// A role with no rights on intake and its own table is accepted, and
	// the statement runs under it, the transaction's role back after it.
	h, err := processor.SQLRouter(ctx, r.db, []config.Handler{{Name: "ok", SQL: "insert into sqlh_pay (key) values (:key)", Role: writer}})
	if err != nil {
		t.Fatal(err)
	}
	r.publish("evt_role", `{}`, "")
	r.run(processor.Options{Handler: h})
	r.settled(1)
	if n := r.count(`SELECT count(*) FROM sqlh_pay WHERE who = $1`, writer); n != 1 {
		t.Fatalf("%d rows written as %s, want 1", n, writer)
	}
}

// TestSQLHandlerBindsEveryParameter: each parameter reaches the statement
// with its value and type; :raw takes a body that is not JSON, and :headers
// holds no Intake header.
func TestSQLHandlerBindsEveryParameter(t *testing.T) {
	t.Parallel()
	r, _ := sqlRig(t)
	ctx := context.Background()
	if _, err := r.db.Exec(ctx, `CREATE TABLE seen (key text, integration text, account text, event_id text, tenant text,
		event_type text, raw bytea, headers jsonb, object_id text, object_version bigint, execution_id text, mode text, received_at timestamptz)`); err != nil {
		t.Fatal(err)
	}
	h, err := processor.SQLRouter(ctx, r.db, []config.Handler{{Name: "all", SQL: `insert into seen values (:key, :integration, :account,
		:event_id, :tenant, :event_type, :raw, :headers, :object_id, :object_version, :execution_id::text, :mode, :received_at)`}})
	if err != nil {
		t.Fatal(err)
	}
	r.publish("evt_raw", `not json at all`, "")
	r.run(processor.Options{Handler: h})
	r.settled(1)
	var (
		k, in, acct, id, tenant, typ, execID, mode string
		raw                                        []byte
		headers                                    map[string]string
		objID                                      *string
		objVer                                     *int64
		at                                         time.Time
	)
	if err := r.db.QueryRow(ctx, `SELECT * FROM seen`).Scan(&k, &in, &acct, &id, &tenant, &typ, &raw, &headers, &objID, &objVer, &execID, &mode, &at); err != nil {
		t.Fatal(err)
	}
	if k != key("evt_raw").String() || in != "demo" || acct != "main" || id != "evt_raw" || tenant != "acme" || typ != "thing.happened" ||
		string(raw) != "not json at all" || len(headers) != 0 || objID != nil || objVer != nil || execID == "" || mode != "original" ||
		time.Since(at) > time.Minute {
		t.Fatalf("bound %q %q %q %q %q %q %q %v %v %v %q %q %v", k, in, acct, id, tenant, typ, raw, headers, objID, objVer, execID, mode, at)
	}
	if n := r.count(`SELECT count(*) FROM intake.executions WHERE id::text = $1`, execID); n != 1 {
		t.Errorf(":execution_id %q is not the execution's id", execID)
	}
}

// TestSQLHandlerOutlivingTheDeadlineFails: a statement that outlives the
// batch's deadline (processor.ack_wait) is a handler failure, retried by
// its own budget and then failed; the other events go on.
func TestSQLHandlerOutlivingTheDeadlineFails(t *testing.T) {
	t.Parallel()
	r, _ := sqlRig(t)
	h, err := processor.SQLRouter(context.Background(), r.db, []config.Handler{{Name: "slow",
		SQL: `select pg_sleep(case when :event_id = 'evt_slow' then 30 else 0 end), 'x'::text as type, '{}'::jsonb as payload`}})
	if err != nil {
		t.Fatal(err)
	}
	r.publish("evt_slow", `{}`, "")
	r.publish("evt_fast", `{}`, "")
	r.run(processor.Options{Handler: h, Config: config.Processor{AckWait: 2 * time.Second, MaxDeliver: 2, Concurrency: 1}})
	testenv.Eventually(t, 40*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'failed' AND event_id = 'evt_slow' AND error LIKE 'handler slow: %'`) == 1 &&
			r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'processed' AND event_id = 'evt_fast'`) == 1
	}, "the slow statement's event was not failed, or the other not processed")
}
