package intake_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/provider"
)

const shopSecret = "shopify-test-client-secret"

// Issue 14, through ingress, stream and processor: one replay of a captured
// orders/updated with X-Shopify-Triggered-At 9999-12-31T23:59:59Z made the
// next genuine update of that order come out stale. The version is now the
// body's signed updated_at, and a signed far-future version is refused, so
// the genuine update after the forged attempt is applied.
func TestGenuineShopifyUpdateAfterForgedFutureVersionIsApplied(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, func(c *config.Config) {
		c.Integrations = append(c.Integrations, config.Integration{Name: "shop", Tenant: "acme", MaxBodyBytes: 4096,
			Config: provider.Config{Provider: "shopify", Secrets: []string{shopSecret}, Tolerance: provider.DefaultTolerance,
				AllowedShops: []string{"acme.myshopify.com"}}})
	})
	in, _ := p.cfg.Integration("shop")
	now := time.Now().UTC()
	send := func(id string, body string, triggeredAt string) int {
		t.Helper()
		h, err := provider.SignMessage(in.Config, 0, provider.Message{ID: id, Type: "orders/updated", Body: []byte(body), Time: now})
		if err != nil {
			t.Fatal(err)
		}
		if triggeredAt != "" {
			h.Set("X-Shopify-Triggered-At", triggeredAt)
		}
		code, _, _ := p.post(delivery{integration: "shop", id: id, body: []byte(body), header: h})
		return code
	}
	order := func(updated time.Time) string {
		return `{"id":7,"admin_graphql_api_id":"gid://shopify/Order/7","updated_at":"` + updated.Format(time.RFC3339) + `"}`
	}
	captured := order(now.Add(-3 * time.Minute))
	if code := send("ev-1", captured, ""); code != http.StatusOK {
		t.Fatalf("first update answered %d", code)
	}
	// The attack: the captured body again, a new id, a far-future
	// Triggered-At. Whatever becomes of it (a new id is the replay
	// guard's case), it carries the captured, signed version.
	send("ev-forged", captured, "9999-12-31T23:59:59Z")
	// Decided before the genuine update arrives: in one batch the processor
	// orders an object's events by version itself.
	p.drained()
	// A signed far-future version is refused outright.
	if code := send("ev-future", `{"id":7,"admin_graphql_api_id":"gid://shopify/Order/7","updated_at":"9999-12-31T23:59:59Z"}`, ""); code != http.StatusBadRequest {
		t.Fatalf("far-future updated_at answered %d, want 400", code)
	}
	if code := send("ev-2", order(now.Add(-time.Minute)), ""); code != http.StatusOK {
		t.Fatalf("genuine update answered %d", code)
	}
	var ev2 inbox.Status
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, e := p.getEvent(viewerToken, "shop", "ev-2")
		ev2 = e.Status
		return code == http.StatusOK && (e.Status == inbox.StatusProcessed || e.Status == inbox.StatusStale)
	}, "the genuine update is never decided")
	if ev2 != inbox.StatusProcessed {
		t.Fatalf("genuine update after the forged far-future attempt: %s, want %s", ev2, inbox.StatusProcessed)
	}
}

// drained waits until the processor has acked (or terminated) every
// INTAKE_IN message. It compares the consumer's ack floor with the stream's
// last sequence: NumPending alone is not enough, because the server counts a
// stored message into its consumers asynchronously, after the PubAck — read
// at once, a consumer can show nothing pending for a message ingress has
// just answered 200 for.
func (p *pipeline) drained() {
	p.t.Helper()
	testenv.Eventually(p.t, 30*time.Second, func() bool {
		ctx := context.Background()
		c, err := p.js.Consumer(ctx, envelope.StreamIn, envelope.ConsumerName)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		if err != nil {
			return false
		}
		s, err := p.js.Stream(ctx, envelope.StreamIn)
		if err != nil {
			return false
		}
		si, err := s.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream == si.State.LastSeq
	}, "the processor never drained INTAKE_IN")
}
