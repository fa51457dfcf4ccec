package intake_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

const guardConfig = `
nats: {publish_timeout: 2s}
processor: {ack_wait: 2s, concurrency: 2}
outbox: {poll_interval: 200ms}
api:
  tokens:
    - {name: viewer, token: ` + viewerToken + `, role: viewer}
integrations:
  - name: gh
    provider: github
    tenant: acme
    secrets: ["gh-secret"]
  - name: shop
    provider: shopify
    tenant: acme
    secrets: ["shop-secret"]
    allowed_shops: [intake-dev.myshopify.com]
  - name: hook
    provider: hmac
    tenant: acme
    secrets: ["hook-secret"]
    hmac: {header: X-Signature, prefix: "sha256=", allow_unsigned_id: true}
    event_id: {header: X-Event-Id}
    event_type: {header: X-Event-Type}
  - name: std
    provider: standard
    tenant: acme
    secrets: ["` + demoSecret + `"]
`

// TestCapturedBodyUnderFreshIDsAppliesOnce is issue 14's replay under fresh
// ids: GitHub, Shopify and hmac with a header id sign the body, not the id
// or the type. One captured body sent again under 50 fresh ids is answered
// 200 each time (ingress cannot know) and applied once per integration; the
// copies are visible to an operator, in the original event's detail and in
// GET /api/v1/rejections?reason=replayed_body. An honest retry (same id)
// stays a duplicate. The guard keys on the body and the type (issue 36), so
// the residual is bounded by type names: the body under 3 other types
// applies once per type, and again under any of them is refused. Without
// the guard every fresh id is a new event: 57 INTAKE_OUT messages per
// integration.
func TestCapturedBodyUnderFreshIDsAppliesOnce(t *testing.T) {
	tr := testrig.New(t, testrig.Options{Config: guardConfig,
		App: &intake.Options{Roles: intake.Roles{Ingress: true, Processor: true, Replayer: true}}})
	const fresh, otherTypes = 50, 3
	post := func(integration, id, typ string, body []byte) {
		t.Helper()
		in, _ := tr.Config.Integration(integration)
		h, err := provider.SignMessage(in.Config, 0, provider.Message{ID: id, Type: typ, Body: body, Time: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if in.Provider == "hmac" {
			h.Set("X-Event-Type", typ)
		}
		req, _ := http.NewRequest(http.MethodPost, tr.App.URL+"/webhooks/"+integration, bytes.NewReader(body))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s (%s): %d, want 200", integration, id, typ, resp.StatusCode)
		}
	}
	guarded := map[string]string{"gh": "push", "shop": "orders/updated", "hook": "invoice.paid"}
	body := func(name string) []byte { return []byte(fmt.Sprintf(`{"id":"captured-%s","amount":100}`, name)) }
	for name, typ := range guarded {
		post(name, "orig-"+name, typ, body(name))
		post(name, "orig-"+name, typ, body(name)) // an honest retry keeps its id
	}
	// The body is captured from a delivery, so its copies come after it.
	// (Copies racing the original in concurrent batches: the first to
	// commit keeps the body — still one effect; see docs/security.md.)
	tr.Settled(t, len(guarded), 30*time.Second)
	for name, typ := range guarded {
		body := body(name)
		for i := range fresh {
			post(name, fmt.Sprintf("fresh-%s-%d", name, i), typ, body)
		}
		for i := range otherTypes {
			post(name, fmt.Sprintf("retyped-%s-%d", name, i), fmt.Sprintf("other.type%d", i), body)
			post(name, fmt.Sprintf("retyped-again-%s-%d", name, i), fmt.Sprintf("other.type%d", i), body)
		}
	}
	// An unguarded integration is unaffected: its ids are signed, and two
	// events may carry equal bodies.
	same := []byte(`{"same":"body"}`)
	post("std", "std-1", "", same)
	post("std", "std-2", "", same)
	tr.CaughtUp(t, 60*time.Second)

	out := map[string]int{}
	for _, m := range tr.Messages(t, envelope.StreamOut) {
		out[m.Header.Get(envelope.HeaderIntegration)]++
	}
	for name := range guarded {
		if out[name] != 1+otherTypes {
			t.Errorf("%s: %d INTAKE_OUT messages, want %d (one business effect per type)", name, out[name], 1+otherTypes)
		}
	}
	if out["std"] != 2 {
		t.Errorf("std (unguarded): %d INTAKE_OUT messages, want 2", out["std"])
	}
	if n := tr.Count(t, `SELECT count(*) FROM intake.inbox WHERE integration <> 'std'`); n != len(guarded)*(1+otherTypes) {
		t.Errorf("%d inbox rows for guarded integrations, want %d (a replayed body reserves no id)", n, len(guarded)*(1+otherTypes))
	}

	c := tr.App.Client(viewerToken)
	ctx := context.Background()
	for name := range guarded {
		// The honest retry, stopped by the stream window, is counted when
		// its receipt is folded.
		var (
			d       apiclient.EventDetail
			lastErr error
		)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if d, lastErr = c.Event(ctx, name, "orig-"+name); lastErr == nil && d.DeliveryCount == 2 {
				break
			}
		}
		if lastErr != nil || d.DeliveryCount != 2 {
			t.Fatalf("orig-%s: delivery_count %d, want 2 (err %v; deliveries %+v)", name, d.DeliveryCount, lastErr, d.Deliveries)
		}
		if len(d.ReplayedBodies) != fresh {
			t.Errorf("orig-%s: %d replayed bodies in its detail, want %d", name, len(d.ReplayedBodies), fresh)
		}
		for _, r := range d.ReplayedBodies {
			if r.Reason != store.RejectReplayedBody || r.OriginalKey != d.Key {
				t.Errorf("orig-%s: replayed body %s: reason %q, original %q", name, r.Key, r.Reason, r.OriginalKey)
				break
			}
		}
		page, err := c.Rejections(ctx, apiclient.RejectionQuery{Reason: store.RejectReplayedBody, Integration: name})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Rejections) != fresh+otherTypes {
			t.Errorf("%s: GET rejections?reason=replayed_body lists %d, want %d", name, len(page.Rejections), fresh+otherTypes)
		}
	}
}
