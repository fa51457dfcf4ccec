package intake_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/replayer/apiclient"
)

const destSecret = "whsec_c2VjcmV0LWtleS1udW1iZXItdHdvLWZvci1yb3RhdGlvbg=="

// hookReceiver is an HTTP destination that verifies each delivery with the
// Standard Webhooks library and records it by webhook-id; while refuse is
// set it answers 422.
type hookReceiver struct {
	*httptest.Server
	refuse atomic.Bool
	mu     sync.Mutex
	got    map[string][]http.Header // accepted deliveries by webhook-id
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(destSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := &hookReceiver{got: map[string][]http.Header{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := wh.Verify(body, r.Header); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if h.refuse.Load() {
			http.Error(w, `{"error":"unknown customer"}`, http.StatusUnprocessableEntity)
			return
		}
		h.mu.Lock()
		h.got[r.Header.Get("webhook-id")] = append(h.got[r.Header.Get("webhook-id")], r.Header.Clone())
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) deliveries() map[string][]http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]http.Header, len(h.got))
	for k, v := range h.got {
		out[k] = v
	}
	return out
}

// startWithDestination runs every role, the dispatcher included, with one
// destination at url taking the demo integration's events.
func startWithDestination(t *testing.T, url string) *pipeline {
	t.Helper()
	tr := testrig.New(t, testrig.Options{Config: testConfig, Mutate: func(c *config.Config) {
		c.Destinations = []config.Destination{{Name: "billing", URL: url, Secrets: []string{destSecret},
			Match: config.DestinationMatch{Integrations: []string{"demo"}}, Timeout: 5 * time.Second,
			Retry: []time.Duration{50 * time.Millisecond}}}
	}, App: &intake.Options{Roles: intake.Roles{Ingress: true, Processor: true, Replayer: true, Dispatcher: true}}})
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, err := tr.JS.Consumer(context.Background(), envelope.StreamOut, "dispatch-billing")
		return err == nil
	}, "the dispatcher never created its consumer")
	return &pipeline{t: t, tr: tr, cfg: tr.Config, base: tr.App.URL, nats: tr.Server, js: tr.JS, db: tr.DB}
}

// TestDestinationEndToEnd: a signed webhook in, processed once, POSTed to
// the destination with the INTAKE_OUT message's id as webhook-id; the
// event's detail and the destinations list show the delivery.
func TestDestinationEndToEnd(t *testing.T) {
	t.Parallel()
	rc := newHookReceiver(t)
	p := startWithDestination(t, rc.URL+"/hooks?token=s3cret")
	d := p.sign("demo", "evt_dest", demoBody("evt_dest", "to billing"), time.Now())
	for range 2 { // the provider's retry: one event, one delivery downstream
		if code, a, _ := p.post(d); code != http.StatusOK {
			t.Fatalf("post = %d %+v", code, a)
		}
	}
	partner := []byte(`{"id":"p_1","type":"order.created"}`)
	pd := p.sign("partner", "p_1", partner, time.Now())
	if code, a, _ := p.post(pd); code != http.StatusOK {
		t.Fatalf("partner post = %d %+v", code, a)
	}
	p.settled(2)
	ops := apiclient.New(p.base, operatorToken, nil)
	var detail apiclient.EventDetail
	testenv.Eventually(t, 30*time.Second, func() bool {
		var err error
		detail, err = ops.Event(context.Background(), "demo", "evt_dest")
		return err == nil && len(detail.DispatchAttempts) == 1
	}, "the event's detail never showed its delivery")
	a := detail.DispatchAttempts[0]
	out := p.outMessages()["demo/main/evt_dest"]
	if len(out) != 1 {
		t.Fatalf("INTAKE_OUT holds %d messages of the event, want 1", len(out))
	}
	if want := out[0].Header.Get(envelope.HeaderMsgID); a.WebhookID != want || a.Outcome != "delivered" || a.StatusCode == nil || *a.StatusCode != 204 {
		t.Errorf("attempt %+v, want delivered 204 under webhook-id %s", a, want)
	}
	got := rc.deliveries()
	if len(got) != 1 || len(got[a.WebhookID]) != 1 {
		t.Fatalf("the receiver got %v, want the demo event once (the partner's does not match)", got)
	}
	h := got[a.WebhookID][0]
	if h.Get("Idempotency-Key") != "demo/main/evt_dest" || h.Get(envelope.HeaderTenant) != "acme" || h.Get("Intake-Destination") != "billing" {
		t.Errorf("delivery headers %v", h)
	}
	list, err := ops.Destinations(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Destinations) != 1 {
		t.Fatalf("destinations %+v", list)
	}
	dst := list.Destinations[0]
	if dst.State != "healthy" || dst.Delivered != 1 || dst.SuccessRate == nil || *dst.SuccessRate != 1 || dst.Backlog == nil || *dst.Backlog != 0 {
		t.Errorf("destination %+v (backlog %v), want healthy, 1 delivered, nothing waiting", dst, dst.Backlog)
	}
	if strings.Contains(dst.URL, "s3cret") || !strings.HasSuffix(dst.URL, "/hooks") {
		t.Errorf("the API's URL %q: the query (a token) must be left out", dst.URL)
	}
}

// TestDestinationOperators: a destination that refuses fails the
// deliveries at once (422); the API shows it failing; an operator pauses
// and resumes it (audited, a reason required, viewers refused) and retries
// its failed deliveries once it accepts: the same webhook-id, to that
// destination only — a subscriber of intake.out.> sees no copy.
func TestDestinationOperators(t *testing.T) {
	t.Parallel()
	rc := newHookReceiver(t)
	rc.refuse.Store(true)
	p := startWithDestination(t, rc.URL)
	ctx := context.Background()
	for i := range 3 {
		id := fmt.Sprintf("evt_op_%d", i)
		if code, a, _ := p.post(p.sign("demo", id, demoBody(id, "x"), time.Now())); code != http.StatusOK {
			t.Fatalf("post = %d %+v", code, a)
		}
	}
	p.settled(3)
	ops, viewer := apiclient.New(p.base, operatorToken, nil), apiclient.New(p.base, viewerToken, nil)
	testenv.Eventually(t, 30*time.Second, func() bool {
		page, err := ops.DestinationAttempts(ctx, "billing", apiclient.DispatchQuery{Outcome: "failed"})
		return err == nil && len(page.Attempts) == 3
	}, "the refused deliveries were never recorded failed")
	page, _ := ops.DestinationAttempts(ctx, "billing", apiclient.DispatchQuery{Outcome: "failed"})
	for _, a := range page.Attempts {
		if a.Attempt != 1 || a.ErrorClass != "client_error" || !strings.Contains(a.Response, "unknown customer") {
			t.Errorf("failed attempt %+v, want the 422 at the first attempt with its answer", a)
		}
	}
	if d, err := ops.Destination(ctx, "billing", "1h"); err != nil || d.State != "failing" || d.Failed != 3 || len(d.RecentAttempts) != 3 {
		t.Errorf("destination %+v (%v), want failing with 3 failed", d.Destination, err)
	}

	// Pause and resume: a reason to pause, operators only, audited.
	if _, err := ops.PauseDestination(ctx, "billing", true, ""); apiclient.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("pause without a reason: %v, want 400", err)
	}
	if _, err := viewer.PauseDestination(ctx, "billing", true, "x"); apiclient.StatusCode(err) != http.StatusForbidden {
		t.Errorf("a viewer's pause: %v, want 403", err)
	}
	if _, err := ops.PauseDestination(ctx, "nope", true, "x"); apiclient.StatusCode(err) != http.StatusNotFound ||
		!strings.Contains(err.Error(), "one of: billing") {
		t.Errorf("pause of an unknown destination: %v, want 404 naming billing", err)
	}
	d, err := ops.PauseDestination(ctx, "billing", true, "billing is migrating")
	if err != nil || d.State != "paused" || d.PausedBy == nil || *d.PausedBy != "ops" {
		t.Fatalf("pause: %+v %v", d, err)
	}
	if _, err := ops.PauseDestination(ctx, "billing", false, "migration done"); err != nil {
		t.Fatal(err)
	}
	detail, err := ops.Destination(ctx, "billing", "")
	if err != nil || len(detail.Actions) != 2 || detail.Actions[0].Action != "resume" || detail.Actions[1].Reason != "billing is migrating" {
		t.Errorf("actions %+v (%v), want the pause and the resume, newest first", detail.Actions, err)
	}

	// Retry the failed deliveries: to billing only, under their webhook-ids.
	onSubjects := func() (out, dispatch int) {
		for _, msgs := range p.outMessages() {
			for _, m := range msgs {
				switch {
				case strings.HasPrefix(m.Subject, "intake.out."):
					out++
				case m.Subject == envelope.SubjectDispatch("billing"):
					dispatch++
				}
			}
		}
		return out, dispatch
	}
	outBefore, _ := onSubjects()
	rc.refuse.Store(false)
	if _, err := ops.StartRedelivery(ctx, apiclient.RedeliveryRequest{Source: "failed", Destination: "nope", Reason: "x"}); apiclient.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("an unknown destination: %v, want 400", err)
	}
	no := false
	dry, err := ops.StartRedelivery(ctx, apiclient.RedeliveryRequest{Source: "failed", Destination: "billing", Reason: "customer created"})
	if err != nil || !dry.DryRun || dry.Matched != 3 {
		t.Fatalf("dry run %+v (%v), want 3 matched", dry, err)
	}
	rep, err := ops.StartRedelivery(ctx, apiclient.RedeliveryRequest{Source: "failed", Destination: "billing", Reason: "customer created", DryRun: &no})
	if err != nil {
		t.Fatal(err)
	}
	if done := testrig.WaitReplay(t, ops, rep.ID, 30*time.Second); done.Published != 3 {
		t.Fatalf("redelivery %+v, want 3 published", done)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return len(rc.deliveries()) == 3 }, "the retried deliveries never arrived")
	for _, a := range page.Attempts {
		if n := len(rc.deliveries()[a.WebhookID]); n != 1 {
			t.Errorf("%s: received %d times, want once under its original webhook-id", a.WebhookID, n)
		}
	}
	if after, copies := onSubjects(); after != outBefore || copies != 3 {
		t.Errorf("INTAKE_OUT: %d messages on intake.out.> after the retry (%d before), %d on intake.dispatch.billing: the 3 copies must go to the destination only", after, outBefore, copies)
	}
	if failed, err := ops.DestinationAttempts(ctx, "billing", apiclient.DispatchQuery{Outcome: "delivered"}); err != nil || len(failed.Attempts) != 3 {
		t.Errorf("delivered attempts %d (%v), want 3", len(failed.Attempts), err)
	}
	if again, err := ops.StartRedelivery(ctx, apiclient.RedeliveryRequest{Source: "failed", Destination: "billing"}); err != nil || again.Matched != 0 {
		t.Errorf("failed deliveries left: %+v (%v), want none", again, err)
	}
}
