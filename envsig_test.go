package intake_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// Issue 30's last residual, through ingress, stream, processor and
// replayer: a publisher with intake.in.> permission (the test's own
// connection) but no envelope key publishes a far-future
// Intake-Object-Version for an existing order. Refused, the next genuine
// update applies (without envelope keys it came out stale: the object was
// frozen), and a replay of a signed event still verifies.
func TestForgedObjectVersionOnIntakeInCannotFreezeAnObject(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, func(c *config.Config) {
		c.Envelope.Keys = []string{"pipeline-envelope-key-0123456789abcdef"}
		c.Integrations = append(c.Integrations, config.Integration{Name: "shop", Tenant: "acme", MaxBodyBytes: 4096,
			Config: provider.Config{Provider: "shopify", Secrets: []string{shopSecret}, Tolerance: provider.DefaultTolerance,
				AllowedShops: []string{"acme.myshopify.com"}}})
	})
	in, _ := p.cfg.Integration("shop")
	now := time.Now().UTC()
	send := func(id string, updated time.Time) {
		t.Helper()
		body := []byte(`{"id":7,"admin_graphql_api_id":"gid://shopify/Order/7","updated_at":"` + updated.Format(time.RFC3339) + `"}`)
		h, err := provider.SignMessage(in.Config, 0, provider.Message{ID: id, Type: "orders/updated", Body: body, Time: now})
		if err != nil {
			t.Fatal(err)
		}
		if code, _, _ := p.post(delivery{integration: "shop", id: id, body: body, header: h}); code != http.StatusOK {
			t.Fatalf("%s answered %d", id, code)
		}
	}
	send("ev-1", now.Add(-3*time.Minute))
	p.drained()

	ctx := context.Background()
	s, err := p.js.Stream(ctx, envelope.StreamIn)
	if err != nil {
		t.Fatal(err)
	}
	genuine, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if genuine.Header.Get(envelope.HeaderSignature) == "" || genuine.Header.Get(envelope.HeaderObjectID) == "" {
		t.Fatalf("ingress published no signature or object id: %v", genuine.Header)
	}
	forge := func(id string, keepSignature bool) {
		t.Helper()
		h := nats.Header{}
		for k, v := range genuine.Header {
			h[k] = append([]string(nil), v...)
		}
		k, _ := envelope.ParseKey(h.Get(envelope.HeaderKey))
		k.EventID = id
		h.Set(envelope.HeaderKey, k.String())
		h.Set(envelope.HeaderEventID, id)
		h.Set(envelope.HeaderMsgID, "forged-"+id)
		h.Set(envelope.HeaderObjectVersion, "4611686018427387904")
		// A body of its own with a matching hash: the replay guard knows
		// ev-1's body, not this one.
		body := []byte(`{"id":7,"admin_graphql_api_id":"gid://shopify/Order/7","note":"` + id + `"}`)
		h.Set(envelope.HeaderPayloadSHA256, envelope.PayloadSHA256(body))
		if !keepSignature {
			h.Del(envelope.HeaderSignature)
		}
		if _, err := p.js.PublishMsg(ctx, &nats.Msg{Subject: genuine.Subject, Header: h, Data: body}); err != nil {
			t.Fatal(err)
		}
	}
	forge("ev-forged-unsigned", false)
	forge("ev-forged-resigned", true) // ev-1's signature over other headers
	p.drained()

	send("ev-2", now.Add(-time.Minute))
	var ev2 inbox.Status
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, e := p.getEvent(viewerToken, "shop", "ev-2")
		ev2 = e.Status
		return code == http.StatusOK && (e.Status == inbox.StatusProcessed || e.Status == inbox.StatusStale)
	}, "the genuine update is never decided")
	if ev2 != inbox.StatusProcessed {
		t.Fatalf("genuine update after the forged far-future version: %s, want %s (the object froze)", ev2, inbox.StatusProcessed)
	}
	reasons := func() map[string]int {
		t.Helper()
		out := map[string]int{}
		rows, err := p.db.Query(ctx, `SELECT reason FROM intake.rejected_messages`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var r string
			if err := rows.Scan(&r); err != nil {
				t.Fatal(err)
			}
			out[r]++
		}
		return out
	}
	want := map[string]int{store.RejectUnsignedEnvelope: 1, store.RejectBadEnvelopeSignature: 1}
	if got := reasons(); len(got) != len(want) || got[store.RejectUnsignedEnvelope] != 1 || got[store.RejectBadEnvelopeSignature] != 1 {
		t.Errorf("rejections %v, want %v", got, want)
	}

	// The replayer's copy keeps the original's signed headers: it verifies.
	c := apiclient.New(p.base, operatorToken, nil)
	wet := false
	k, _ := envelope.ParseKey(genuine.Header.Get(envelope.HeaderKey))
	rep, err := c.StartReplay(ctx, apiclient.ReplayRequest{Selector: apiclient.Selector{Keys: []string{k.String()}},
		Mode: inbox.ReplayReexecute, DryRun: &wet, Reason: "signed envelope test"})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if rep = testrig.WaitReplay(t, c, rep.ID, 30*time.Second); rep.State != apiclient.ReplayDone || rep.Published != 1 {
		t.Fatalf("replay ended %s with %d published (error %v)", rep.State, rep.Published, rep.Error)
	}
	p.drained()
	if got := reasons(); len(got) != len(want) || got[store.RejectUnsignedEnvelope] != 1 || got[store.RejectBadEnvelopeSignature] != 1 {
		t.Errorf("after the replay, rejections %v, want %v: the replay copy was refused", got, want)
	}
	var runs int
	if err := p.db.QueryRow(ctx, `SELECT count(*) FROM intake.executions WHERE replay_id = $1`, rep.ID).Scan(&runs); err != nil || runs != 1 {
		t.Errorf("%d executions of the replay (%v), want 1", runs, err)
	}
	// Reconcile counts the refused forgeries rejected, not missing: the
	// re-drive has nothing to republish.
	res, err := c.Reconcile(ctx, apiclient.ReconcileQuery{FromSeq: 1, Integration: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rejected != 2 || len(res.Missing) != 0 {
		t.Errorf("reconcile: %d rejected, missing %v; want the 2 forgeries rejected, none missing", res.Rejected, res.Missing)
	}
}
