package dispatcher_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/intakehq/intake/dispatcher"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// dest is a destination at url with the test's secret and short waits.
func dest(name, url string) config.Destination {
	return config.Destination{Name: name, URL: url, Secrets: []string{secret}, Timeout: 2 * time.Second,
		Retry:   []time.Duration{20 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond},
		Breaker: config.DestinationBreaker{Failures: 1000, Probe: 100 * time.Millisecond}}
}

// running is a dispatcher started on the rig, stopped when the test ends
// (or by stop).
type running struct {
	m      *telemetry.Metrics
	cancel func() // ends Run's context without waiting
	stop   func() // cancel, then wait for Run to return
}

func start(t *testing.T, r *testrig.Rig, dests ...config.Destination) running {
	t.Helper()
	m := telemetry.NewMetricsFor(telemetry.Roles{Dispatcher: true})
	d, err := dispatcher.New(dispatcher.Options{Destinations: dests, Store: r.Store, JS: r.JS, Metrics: m,
		StateInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("dispatcher: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	// Run creates the consumers (new messages only): wait for them.
	for _, c := range dests {
		testenv.Eventually(t, 10*time.Second, func() bool {
			_, err := r.JS.Consumer(context.Background(), envelope.StreamOut, c.Durable())
			return err == nil
		}, "consumer %s never created", c.Durable())
	}
	return running{m: m, cancel: cancel, stop: stop}
}

// publish puts n processed messages on INTAKE_OUT as the processor does
// (ids from envelope.OutboxMsgID) and returns their ids, in order.
func publish(t *testing.T, r *testrig.Rig, integration, typ string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		k := envelope.Key{Integration: integration, Account: "main", EventID: fmt.Sprintf("evt_%s_%s_%d", t.Name(), typ, i)}
		msg := nats.NewMsg(envelope.SubjectOut("acme", integration, typ))
		ids[i] = envelope.OutboxMsgID(k, inbox.ModeOriginal, "", 0)
		msg.Header.Set(envelope.HeaderMsgID, ids[i])
		msg.Header.Set(envelope.HeaderKey, k.String())
		msg.Header.Set(envelope.HeaderIntegration, integration)
		msg.Header.Set(envelope.HeaderTenant, "acme")
		msg.Header.Set(envelope.HeaderAccount, "main")
		msg.Header.Set(envelope.HeaderEventID, k.EventID)
		msg.Header.Set(envelope.HeaderEventType, typ)
		msg.Header.Set(envelope.HeaderExecutionID, fmt.Sprintf("exec-%d", i))
		msg.Data = fmt.Appendf(nil, `{"type":%q,"n":%d}`, typ, i)
		r.Publish(t, msg)
	}
	return ids
}

// receiver records what it is sent after checking the signature with the
// Standard Webhooks reference library; answer decides each answer (nil:
// 204).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []*http.Request
	bodies [][]byte
	byID   map[string]int
	bad    int
	answer func(w http.ResponseWriter, r *http.Request, nth int) // nth: this id's delivery, from 1
}

func newReceiver(t *testing.T, answer func(http.ResponseWriter, *http.Request, int)) *receiver {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{byID: map[string]int{}, answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		if err := wh.Verify(body, r.Header); err != nil {
			rc.bad++
			rc.mu.Unlock()
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		id := r.Header.Get("webhook-id")
		rc.byID[id]++
		nth := rc.byID[id]
		rc.got, rc.bodies = append(rc.got, r), append(rc.bodies, body)
		rc.mu.Unlock()
		if rc.answer != nil {
			rc.answer(w, r, nth)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

func (rc *receiver) deliveries(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.byID[id]
}

// attempts returns the delivery log's rows of destination, oldest first.
func attempts(t *testing.T, r *testrig.Rig, destination string) []store.DispatchAttempt {
	t.Helper()
	rows, err := r.DB.Query(context.Background(), `SELECT msg_id, attempt, outcome, coalesce(status_code, 0), error_class, response, key
		FROM intake.dispatch_attempts WHERE destination = $1 ORDER BY id`, destination)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []store.DispatchAttempt
	for rows.Next() {
		a := store.DispatchAttempt{Destination: destination}
		if err := rows.Scan(&a.MsgID, &a.Attempt, &a.Outcome, &a.StatusCode, &a.ErrorClass, &a.Response, &a.Key); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// settled waits until destination's delivery log has n rows with outcome
// delivered or failed, and its consumer has nothing unacknowledged.
func settled(t *testing.T, r *testrig.Rig, destination string, n int) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() bool {
		done := r.Count(t, `SELECT count(*) FROM intake.dispatch_attempts WHERE destination = $1 AND outcome <> 'retry'`, destination)
		if done != n {
			return false
		}
		c, err := r.JS.Consumer(context.Background(), envelope.StreamOut, config.DestinationDurablePrefix+destination)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, "destination %s never settled at %d final attempts", destination, n)
}

func TestDeliversSignedWithTheEventsIdentity(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	rc := newReceiver(t, nil)
	start(t, r, dest("billing", rc.URL))
	ids := publish(t, r, "stripe-demo", "invoice.paid", 5)
	settled(t, r, "billing", 5)

	if rc.count() != 5 || rc.bad != 0 {
		t.Fatalf("receiver got %d deliveries (%d badly signed), want 5", rc.count(), rc.bad)
	}
	for i, req := range rc.got {
		h := req.Header
		if h.Get("webhook-id") != ids[i] && rc.deliveries(ids[i]) != 1 {
			t.Errorf("delivery %d: webhook-id %q, want the INTAKE_OUT message id %q", i, h.Get("webhook-id"), ids[i])
		}
		key := h.Get(envelope.HeaderKey)
		for name, want := range map[string]string{
			"Idempotency-Key": key, envelope.HeaderIntegration: "stripe-demo", envelope.HeaderTenant: "acme",
			envelope.HeaderEventType: "invoice.paid", "Intake-Destination": "billing", "Intake-Attempt": "1",
			"Content-Type": "application/json", envelope.HeaderAccount: "main",
		} {
			if got := h.Get(name); got != want {
				t.Errorf("delivery %d: %s = %q, want %q", i, name, got, want)
			}
		}
		if !strings.HasPrefix(key, "stripe-demo/main/evt_") || h.Get(envelope.HeaderExecutionID) == "" {
			t.Errorf("delivery %d: identity headers missing: %v", i, h)
		}
		if ts, _ := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64); time.Since(time.Unix(ts, 0)) > time.Minute {
			t.Errorf("delivery %d: webhook-timestamp %q is not now", i, h.Get("webhook-timestamp"))
		}
	}
	for _, a := range attempts(t, r, "billing") {
		if a.Outcome != store.DispatchDelivered || a.StatusCode != 204 || a.Attempt != 1 || a.ErrorClass != "" {
			t.Errorf("log row %+v, want delivered 204 at attempt 1", a)
		}
	}
}

// A destination answering 503 twice gets the same delivery (same
// webhook-id, new timestamp) until it answers 2xx; the log has each try.
func TestRetriesWithTheSameWebhookID(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, nth int) {
		if nth <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	run := start(t, r, dest("flaky", rc.URL))
	ids := publish(t, r, "demo", "demo.created", 3)
	settled(t, r, "flaky", 3)
	for _, id := range ids {
		if n := rc.deliveries(id); n != 3 {
			t.Errorf("%s delivered %d times, want 3 (two 503s, then 200)", id, n)
		}
	}
	rows := attempts(t, r, "flaky")
	outcomes := map[string][]string{}
	for _, a := range rows {
		outcomes[a.MsgID] = append(outcomes[a.MsgID], fmt.Sprintf("%d:%s:%d:%s", a.Attempt, a.Outcome, a.StatusCode, a.ErrorClass))
	}
	for _, id := range ids {
		want := "1:retry:503:server_error 2:retry:503:server_error 3:delivered:200:"
		if got := strings.Join(outcomes[id], " "); got != want {
			t.Errorf("%s log: %s, want %s", id, got, want)
		}
	}
	if got := testutil.ToFloat64(run.m.Dispatch.Attempts.WithLabelValues("flaky", "retry", "server_error")); got != 6 {
		t.Errorf("attempts_total{retry, server_error} = %v, want 6", got)
	}
	// Attempt numbers reached the receiver.
	rc.mu.Lock()
	defer rc.mu.Unlock()
	seen := map[string]bool{}
	for _, req := range rc.got {
		seen[req.Header.Get("Intake-Attempt")] = true
	}
	if !seen["1"] || !seen["2"] || !seen["3"] {
		t.Errorf("Intake-Attempt values %v, want 1, 2 and 3", seen)
	}
}

// Other 4xx fail at once (no retry can mend them), unless listed in
// retry_statuses; a redirect is never followed and fails; running out of
// retries fails.
func TestFailures(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	elsewhere := newReceiver(t, nil)
	rc := newReceiver(t, func(w http.ResponseWriter, req *http.Request, nth int) {
		switch req.Header.Get(envelope.HeaderEventType) {
		case "bad.request":
			http.Error(w, `{"error":"no such customer"}`, http.StatusBadRequest)
		case "conflict":
			if nth == 1 {
				http.Error(w, "locked", http.StatusConflict)
				return
			}
			w.WriteHeader(http.StatusAccepted)
		case "moved":
			http.Redirect(w, req, elsewhere.URL, http.StatusTemporaryRedirect)
		default:
			http.Error(w, "down", http.StatusInternalServerError)
		}
	})
	d := dest("strict", rc.URL)
	d.RetryStatuses = []int{409}
	start(t, r, d)
	bad := publish(t, r, "demo", "bad.request", 1)[0]
	conflict := publish(t, r, "demo", "conflict", 1)[0]
	moved := publish(t, r, "demo", "moved", 1)[0]
	down := publish(t, r, "demo", "down", 1)[0]
	settled(t, r, "strict", 4)

	final := map[string]store.DispatchAttempt{}
	for _, a := range attempts(t, r, "strict") {
		final[a.MsgID] = a
	}
	for id, want := range map[string]string{
		bad: "1 failed 400 client_error", conflict: "2 delivered 202 ", moved: "1 failed 307 redirect",
		down: "4 failed 500 server_error",
	} {
		a := final[id]
		if got := fmt.Sprintf("%d %s %d %s", a.Attempt, a.Outcome, a.StatusCode, a.ErrorClass); got != want {
			t.Errorf("%s: last attempt %q, want %q", id, got, want)
		}
	}
	if !strings.Contains(final[bad].Response, "no such customer") {
		t.Errorf("the log keeps the answer's body: %q", final[bad].Response)
	}
	if elsewhere.count() != 0 {
		t.Errorf("the redirect was followed: its target got %d requests", elsewhere.count())
	}
}

// Hostile receivers are bounded and recorded, and never hang a worker: a
// huge answer, one that never ends, headers that never come, an answer that
// is not HTTP, a refused connection.
func TestHostileReceivers(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	huge := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 160 { // 10 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	endless := newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case <-release:
				return
			case <-req.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := w.Write([]byte("tick\n")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	})
	silent := newReceiver(t, func(w http.ResponseWriter, req *http.Request, nth int) {
		if nth == 1 {
			select {
			case <-release:
			case <-req.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	garbage := rawServer(t, "this is not HTTP\r\n\r\n")
	refused := closedPort(t)

	ds := []config.Destination{dest("huge", huge.URL), dest("endless", endless.URL), dest("silent", silent.URL),
		dest("garbage", garbage), dest("refused", refused)}
	for i := range ds {
		ds[i].Timeout = 500 * time.Millisecond
		ds[i].Retry = []time.Duration{10 * time.Millisecond}
	}
	start(t, r, ds...)
	publish(t, r, "demo", "demo.created", 1)
	for _, d := range ds {
		settled(t, r, d.Name, 1)
	}
	last := func(name string) store.DispatchAttempt {
		rows := attempts(t, r, name)
		return rows[len(rows)-1]
	}
	if a := last("huge"); a.Outcome != store.DispatchDelivered || !strings.HasPrefix(a.Response, "[answer longer than 64 KiB: cut]") ||
		len(a.Response) > store.MaxDispatchResponse {
		t.Errorf("huge: %s, response %d bytes starting %.40q", a.Outcome, len(a.Response), a.Response)
	}
	if a := last("endless"); a.Outcome != store.DispatchDelivered || !strings.Contains(a.Response, "answer body broke off: timeout") {
		t.Errorf("endless: %s %q", a.Outcome, a.Response)
	}
	if rows := attempts(t, r, "silent"); len(rows) != 2 || rows[0].ErrorClass != dispatcher.ClassTimeout || rows[1].Outcome != store.DispatchDelivered {
		t.Errorf("silent: %+v, want a timeout then delivered", rows)
	}
	for _, name := range []string{"garbage", "refused"} {
		rows := attempts(t, r, name)
		want := map[string]string{"garbage": dispatcher.ClassConnection, "refused": dispatcher.ClassConnect}[name]
		if len(rows) != 2 || rows[0].ErrorClass != want || rows[1].Outcome != store.DispatchFailed || rows[1].StatusCode != 0 {
			t.Errorf("%s: %+v, want two %s attempts, the last failed", name, rows, want)
		}
	}
}

// rawServer answers every connection with reply and closes it.
func rawServer(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_, _ = bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte(reply))
			})
		}
	})
	return "http://" + ln.Addr().String() + "/hook"
}

// closedPort is a URL on a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("http://127.0.0.1:%d/hook", testenv.FreePort(t))
}

// A 429 with Retry-After longer than the schedule's wait is honoured: the
// log's next attempt is at least that far.
func TestRetryAfterIsHonoured(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, nth int) {
		if nth == 1 {
			w.Header().Set("Retry-After", "2")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	start(t, r, dest("limited", rc.URL))
	publish(t, r, "demo", "demo.created", 1)
	settled(t, r, "limited", 1)
	var wait time.Duration
	if err := r.DB.QueryRow(context.Background(), `SELECT extract(epoch FROM next_attempt_at - attempted_at) * interval '1 second'
		FROM intake.dispatch_attempts WHERE destination = 'limited' AND outcome = 'retry'`).Scan(&wait); err != nil {
		t.Fatal(err)
	}
	if wait < 2*time.Second {
		t.Errorf("next attempt %s after the 429, want at least its Retry-After (2s)", wait)
	}
	rows := attempts(t, r, "limited")
	if len(rows) != 2 || rows[0].ErrorClass != dispatcher.ClassRateLimited || rows[1].Outcome != store.DispatchDelivered {
		t.Errorf("log %+v, want rate_limited then delivered", rows)
	}
}

// A destination that hangs does not slow another: each has its own
// consumer and workers.
func TestSlowDestinationDoesNotSlowAnother(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	release := make(chan struct{})
	stuck := newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) {
		select {
		case <-release:
		case <-req.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})
	fast := newReceiver(t, nil)
	slow := dest("slow", stuck.URL)
	slow.MaxInFlight, slow.Timeout = 1, time.Minute
	start(t, r, slow, dest("fast", fast.URL))
	publish(t, r, "demo", "demo.created", 20)
	settled(t, r, "fast", 20)
	if n := stuck.count(); n != 1 {
		t.Errorf("the stuck destination got %d requests, want 1 (max_in_flight 1, its answer held)", n)
	}
	close(release)
	settled(t, r, "slow", 20)
}

// An operator's pause stops deliveries to the destination on every
// dispatcher until resumed; nothing is lost meanwhile.
func TestPauseAndResume(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	rc := newReceiver(t, nil)
	run := start(t, r, dest("paused", rc.URL))
	ctx := context.Background()
	pause(t, r, run, "paused", "receiver migration")
	// A pull already waiting when the pause was read ends within a second;
	// then nothing is fetched while paused.
	testenv.Eventually(t, 10*time.Second, func() bool {
		c, err := r.JS.Consumer(ctx, envelope.StreamOut, "dispatch-paused")
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumWaiting == 0
	}, "the paused dispatcher kept pulling")
	publish(t, r, "demo", "demo.created", 5)
	testenv.Eventually(t, 10*time.Second, func() bool {
		c, err := r.JS.Consumer(ctx, envelope.StreamOut, "dispatch-paused")
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumPending == 5
	}, "the messages never reached the consumer")
	if n := rc.count(); n != 0 {
		t.Fatalf("a paused destination got %d deliveries", n)
	}
	if err := r.Store.SetDestinationPaused(ctx, "paused", false, "alice", ""); err != nil {
		t.Fatal(err)
	}
	settled(t, r, "paused", 5)
	if n := rc.count(); n != 5 {
		t.Errorf("after resuming, %d deliveries, want 5", n)
	}
}

// Failures in a row open the breaker (recorded in
// intake.destination_state); it probes one delivery at a time, and closes
// when the destination answers again: everything is delivered.
func TestBreakerOpensProbesAndCloses(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	var mu sync.Mutex
	up := false
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		mu.Lock()
		defer mu.Unlock()
		if !up {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	d := dest("breaker", rc.URL)
	d.Breaker = config.DestinationBreaker{Failures: 3, Probe: 50 * time.Millisecond}
	d.Retry = make([]time.Duration, 100)
	for i := range d.Retry {
		d.Retry[i] = 50 * time.Millisecond
	}
	run := start(t, r, d)
	publish(t, r, "demo", "demo.created", 10)
	testenv.Eventually(t, 20*time.Second, func() bool {
		return testutil.ToFloat64(run.m.Dispatch.CircuitOpen.WithLabelValues("breaker")) == 1
	}, "the breaker never opened")
	testenv.Eventually(t, 10*time.Second, func() bool {
		return r.Count(t, `SELECT count(*) FROM intake.destination_state WHERE destination = 'breaker' AND circuit_open`) == 1
	}, "the open breaker was never recorded")
	mu.Lock()
	up = true
	mu.Unlock()
	settled(t, r, "breaker", 10)
	if got := testutil.ToFloat64(run.m.Dispatch.CircuitOpen.WithLabelValues("breaker")); got != 0 {
		t.Errorf("circuit_open = %v after the destination answered", got)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		return r.Count(t, `SELECT count(*) FROM intake.destination_state WHERE destination = 'breaker' AND NOT circuit_open`) == 1
	}, "the closed breaker was never recorded")
}

// match selects by tenant and integration (the consumer's filters) and by
// type (in the dispatcher: other types are acked without a delivery).
func TestMatch(t *testing.T) {
	r := testrig.New(t, testrig.Options{Config: `
integrations:
  - {name: stripe-demo, provider: stripe, tenant: acme, secrets: ["whsec_test"]}
  - {name: github, provider: github, tenant: acme, secrets: ["s"]}
`})
	rc := newReceiver(t, nil)
	d := dest("invoices", rc.URL)
	d.Match = config.DestinationMatch{Tenants: []string{"acme"}, Integrations: []string{"stripe-demo"}, Types: []string{"invoice.*"}}
	run := start(t, r, d)
	want := publish(t, r, "stripe-demo", "invoice.paid", 2)
	publish(t, r, "stripe-demo", "customer.created", 3)
	publish(t, r, "github", "invoice.paid", 4)
	testenv.Eventually(t, 20*time.Second, func() bool {
		return testutil.ToFloat64(run.m.Dispatch.Skipped.WithLabelValues("invoices")) == 3
	}, "the other types were never skipped")
	settled(t, r, "invoices", 2)
	for _, id := range want {
		if rc.deliveries(id) != 1 {
			t.Errorf("%s delivered %d times, want 1", id, rc.deliveries(id))
		}
	}
	if rc.count() != 2 {
		t.Errorf("%d deliveries, want 2 (stripe-demo's invoice.* only)", rc.count())
	}
}

// A destination removed from the config stops being delivered to: its
// durable is removed at the next start, with a log line.
func TestRemovedDestinationsDurableIsRemoved(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	rc := newReceiver(t, nil)
	first := start(t, r, dest("gone", rc.URL), dest("kept", rc.URL))
	first.stop()
	start(t, r, dest("kept", rc.URL))
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, err := r.JS.Consumer(context.Background(), envelope.StreamOut, "dispatch-gone")
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	}, "the removed destination's consumer is still there")
	if _, err := r.JS.Consumer(context.Background(), envelope.StreamOut, "dispatch-kept"); err != nil {
		t.Errorf("the kept destination's consumer: %v", err)
	}
}

// A consumer deleted behind the dispatcher's back is made again: the
// messages published after that are delivered.
func TestDeletedConsumerIsMadeAgain(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	rc := newReceiver(t, nil)
	start(t, r, dest("again", rc.URL))
	ctx := context.Background()
	if err := r.JS.DeleteConsumer(ctx, envelope.StreamOut, "dispatch-again"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, func() bool {
		_, err := r.JS.Consumer(ctx, envelope.StreamOut, "dispatch-again")
		return err == nil
	}, "the deleted consumer was never made again")
	ids := publish(t, r, "demo", "demo.created", 3)
	settled(t, r, "again", 3)
	for _, id := range ids {
		if rc.deliveries(id) != 1 {
			t.Errorf("%s delivered %d times, want 1", id, rc.deliveries(id))
		}
	}
}

// holdingFirst is a receiver that holds its first delivery until release
// is closed (arrived is closed when it comes) and answers 204 at once to
// every other.
func holdingFirst(t *testing.T) (rc *receiver, arrived, release chan struct{}) {
	arrived, release = make(chan struct{}), make(chan struct{})
	var first sync.Once
	rc = newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		held := false
		first.Do(func() { held = true })
		if held {
			close(arrived)
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return rc, arrived, release
}

// ackPending is how many messages d's consumer has delivered and not had
// acknowledged; -1 when it cannot say.
func ackPending(r *testrig.Rig, d config.Destination) int {
	ctx := context.Background()
	c, err := r.JS.Consumer(ctx, envelope.StreamOut, d.Durable())
	if err != nil {
		return -1
	}
	info, err := c.Info(ctx)
	if err != nil {
		return -1
	}
	return info.NumAckPending
}

// pause has an operator pause destination and waits until the running
// dispatcher has read it.
func pause(t *testing.T, r *testrig.Rig, run running, destination, reason string) {
	t.Helper()
	if err := r.Store.SetDestinationPaused(context.Background(), destination, true, "alice", reason); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		return testutil.ToFloat64(run.m.Dispatch.Paused.WithLabelValues(destination)) == 1
	}, "the pause never reached the dispatcher")
}

// A stopping dispatcher finishes the attempt in flight and gives back at
// once what it fetched ahead and had not attempted: the receiver sees one
// delivery before the stop, and the next dispatcher delivers the rest,
// each once.
func TestStopGivesBackWhatItFetchedAhead(t *testing.T) {
	r := testrig.New(t, testrig.Options{})
	rc, arrived, release := holdingFirst(t)
	d := dest("stopping", rc.URL)
	d.MaxInFlight = 1
	run := start(t, r, d)
	ids := publish(t, r, "demo", "demo.created", 5)
	<-arrived
	testenv.Eventually(t, 10*time.Second, func() bool { return ackPending(r, d) > 1 },
		"the dispatcher never fetched ahead of its one worker")
	run.cancel() // before the attempt in flight gets its answer
	close(release)
	run.stop()
	if n := rc.count(); n != 1 {
		t.Fatalf("the stopping dispatcher made %d deliveries, want only the one in flight", n)
	}
	if rows := attempts(t, r, "stopping"); len(rows) != 1 || rows[0].Outcome != store.DispatchDelivered {
		t.Fatalf("delivery log %+v, want the one delivered attempt", rows)
	}
	start(t, r, d)
	settled(t, r, "stopping", 5)
	for _, id := range ids {
		if n := rc.deliveries(id); n != 1 {
			t.Errorf("%s delivered %d times, want 1", id, n)
		}
	}
}

// Messages fetched ahead and held through a pause longer than the ack
// wait are kept (InProgress): after the resume each is delivered once,
// none sent again behind the copy the dispatcher holds.
func TestHeldMessagesOutlastTheAckWait(t *testing.T) {
	t.Cleanup(dispatcher.SetAckMargin(time.Second)) // restored after the dispatcher stops
	r := testrig.New(t, testrig.Options{})
	rc, arrived, release := holdingFirst(t)
	d := dest("held", rc.URL)
	d.MaxInFlight, d.Timeout = 1, 500*time.Millisecond
	run := start(t, r, d)
	ids := publish(t, r, "demo", "demo.created", 4)
	<-arrived
	testenv.Eventually(t, 10*time.Second, func() bool { return ackPending(r, d) == 4 },
		"the dispatcher never fetched the three messages ahead of its one worker")
	ctx := context.Background()
	pause(t, r, run, "held", "longer than the ack wait")
	close(release)
	time.Sleep(3 * (d.Timeout + time.Second)) // three ack waits, paused
	if err := r.Store.SetDestinationPaused(ctx, "held", false, "alice", ""); err != nil {
		t.Fatal(err)
	}
	settled(t, r, "held", 4)
	for _, id := range ids {
		if n := rc.deliveries(id); n != 1 {
			t.Errorf("%s delivered %d times, want 1", id, n)
		}
	}
}
