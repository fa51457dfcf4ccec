package intake_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

// TestShopifyTopicsWithOneBodyBothApply is issue 36 through ingress, stream
// and processor. Shopify sends orders/create and orders/updated of a new
// order with byte-identical bodies (same updated_at: equal object versions
// apply); keyed on the body alone, the second was answered 200 and never
// applied. Both apply now. The captured body under a fresh id and the same
// topic is still refused: recorded, counted, no inbox row. And it is not
// lost for good: a replay of its key that does not admit replayed bodies is
// predicted and found refused again; one with admit_replayed_bodies applies
// it once. A replay admitting by range is refused (400); the re-drive's
// refusal is replayer's TestAdmissionNeedsKeysAndAnOperator.
func TestShopifyTopicsWithOneBodyBothApply(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, func(c *config.Config) {
		c.Integrations = append(c.Integrations, config.Integration{Name: "shop", Tenant: "acme", MaxBodyBytes: 4096,
			Config: provider.Config{Provider: "shopify", Secrets: []string{shopSecret}, Tolerance: provider.DefaultTolerance,
				AllowedShops: []string{"acme.myshopify.com"}}})
	})
	in, _ := p.cfg.Integration("shop")
	now := time.Now().UTC()
	body := []byte(fmt.Sprintf(`{"id":8,"admin_graphql_api_id":"gid://shopify/Order/8","cancelled_at":null,"updated_at":%q}`,
		now.Add(-time.Minute).Format(time.RFC3339)))
	send := func(id, topic string) {
		t.Helper()
		h, err := provider.SignMessage(in.Config, 0, provider.Message{ID: id, Type: topic, Body: body, Time: now})
		if err != nil {
			t.Fatal(err)
		}
		if code, _, _ := p.post(delivery{integration: "shop", id: id, body: body, header: h}); code != http.StatusOK {
			t.Fatalf("%s (%s) answered %d, want 200", id, topic, code)
		}
	}
	send("wh-create", "orders/create")
	send("wh-update", "orders/updated")
	p.settled(2)
	send("wh-copy", "orders/updated") // the attack: a captured body, a fresh id
	p.drained()

	out := p.outMessages()
	for _, id := range []string{"wh-create", "wh-update"} {
		k := envelope.Key{Integration: "shop", Account: "acme.myshopify.com", EventID: id}
		if len(out[k.String()]) != 1 {
			t.Errorf("%s: %d INTAKE_OUT messages, want 1 (applied once)", id, len(out[k.String()]))
		}
	}
	copyKey := envelope.Key{Integration: "shop", Account: "acme.myshopify.com", EventID: "wh-copy"}
	if len(out[copyKey.String()]) != 0 {
		t.Errorf("the copy under a fresh id applied")
	}
	if n := p.tr.Count(t, `SELECT count(*) FROM intake.inbox WHERE integration = 'shop'`); n != 2 {
		t.Errorf("%d inbox rows, want 2 (the copy reserves no id)", n)
	}
	refused := func() int {
		return p.tr.Count(t, `SELECT count(*) FROM intake.rejected_messages WHERE event_id = 'wh-copy' AND reason = $1
			AND original_event_id = 'wh-update'`, store.RejectReplayedBody)
	}
	if n := refused(); n != 1 {
		t.Fatalf("the copy is recorded %d times as a replay of wh-update, want 1", n)
	}
	if got := testutil.ToFloat64(p.tr.App.Metrics.ProcessorRejected.WithLabelValues("shop", store.RejectReplayedBody)); got != 1 {
		t.Errorf("intake_processor_rejected_total{reason=replayed_body} = %v, want 1", got)
	}

	// The operator judges wh-copy genuine: admission by its key.
	c := p.tr.App.Client(operatorToken)
	ctx := context.Background()
	start := func(admit, dry bool) apiclient.Replay {
		t.Helper()
		rep, err := c.StartReplay(ctx, apiclient.ReplayRequest{Selector: apiclient.Selector{Keys: []string{copyKey.String()}},
			DryRun: &dry, Reason: "issue 36", AdmitReplayedBodies: admit})
		if err != nil {
			t.Fatal(err)
		}
		if dry {
			return rep
		}
		return testrig.WaitReplay(t, c, rep.ID, time.Minute)
	}
	if rep := start(false, true); rep.Outcomes[replayer.WouldRefuseReplayedBody] != 1 {
		t.Errorf("dry run without admission: outcomes %v, want %s", rep.Outcomes, replayer.WouldRefuseReplayedBody)
	}
	if rep := start(false, false); rep.Published != 1 {
		t.Fatalf("replay without admission published %d, want 1", rep.Published)
	}
	p.drained()
	if n := refused(); n != 2 {
		t.Errorf("after a replay without admission the copy is refused %d times, want 2", n)
	}
	if rep := start(true, true); rep.Outcomes[replayer.WouldApply] != 1 || !rep.AdmitReplayedBodies {
		t.Errorf("dry run admitting: outcomes %v (admit %v), want %s", rep.Outcomes, rep.AdmitReplayedBodies, replayer.WouldApply)
	}
	start(true, false)
	p.settled(3)
	p.drained()
	if out := p.outMessages(); len(out[copyKey.String()]) != 1 {
		t.Errorf("the admitted delivery: %d INTAKE_OUT messages, want 1", len(out[copyKey.String()]))
	}
	if n := refused(); n != 2 {
		t.Errorf("the admitted copy was refused (%d records, want 2)", n)
	}

	// Admission names keys; a range would apply every captured copy in it.
	dry := true
	_, err := c.StartReplay(ctx, apiclient.ReplayRequest{Selector: apiclient.Selector{Integration: "shop",
		StreamSeq: &apiclient.SeqRange{From: 1}}, DryRun: &dry, AdmitReplayedBodies: true})
	if apiclient.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("admit_replayed_bodies with a range: %v, want 400", err)
	}
}
