package replayer_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// copyOf returns the ingress message of id in INTAKE_IN, to publish again.
func (r *rig) copyOf(id string) *nats.Msg {
	r.t.Helper()
	return r.tr.DeliveryOf(r.t, key(id).String())
}

// TestRejectedMessagesInTheAPI publishes what a client with publish rights
// on intake.in.> could — copies claiming a real replay that did not select
// them, a re-execution with an invented replay id, another tenant, an
// unconfigured integration, another integration's subject — next to a
// genuine replay through the API: the genuine replay applies, the rest
// apply nothing and are listed by GET /api/v1/rejections, in the event
// detail, and in intake_processor_rejected_total.
func TestRejectedMessagesInTheAPI(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	r.publish("evt_a", "evt_b")
	r.settled()

	// A genuine re-execution of evt_a through the replayer's API.
	rep := r.replay(map[string]any{"selector": map[string]any{"keys": keysOf("evt_a")}, "mode": "reexecute", "reason": "fix"})
	r.settled()
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1 AND replay_id = $2`, key("evt_a").String(), rep.ID); n != 1 {
		t.Fatalf("the genuine re-execution ran %d times, want 1", n)
	}

	forge := func(id, replayID, mode string) *nats.Msg {
		m := r.copyOf(id)
		m.Header.Set(envelope.HeaderReplayID, replayID)
		m.Header.Set(envelope.HeaderReplayMode, mode)
		m.Header.Set(envelope.HeaderMsgID, "replay:"+replayID+":"+key(id).String())
		return m
	}
	delivery := func(k envelope.Key, tenant string) *nats.Msg {
		return envelope.NewDelivery(k, tenant, "invoice.paid", []byte(`{"forged":true}`), time.Now()).Msg()
	}
	otherSubject := delivery(key("evt_s"), "acme")
	otherSubject.Subject = envelope.SubjectIn("partner", "invoice.paid")
	want := map[uint64]string{
		r.tr.Publish(t, forge("evt_b", rep.ID, "reexecute")):                                                 store.RejectReplayNotCovering,
		r.tr.Publish(t, forge("evt_a", uuid.NewString(), "reexecute")):                                       store.RejectUnknownReplay,
		r.tr.Publish(t, delivery(key("evt_t"), "globex")):                                                    store.RejectTenantMismatch,
		r.tr.Publish(t, delivery(envelope.Key{Integration: "ghost", Account: "main", EventID: "g"}, "acme")): store.RejectUnknownIntegration,
		r.tr.Publish(t, otherSubject):                                                                        store.RejectSubjectMismatch,
	}
	r.settled()

	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_a").String()); n != 2 {
		t.Errorf("evt_a: %d effects, want 2 (the original and the genuine re-execution)", n)
	}
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_b").String()); n != 1 {
		t.Errorf("evt_b: %d effects, want 1: a replay ran a key it did not select", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.inbox`); n != 2 {
		t.Errorf("%d inbox rows, want 2: a rejected message claimed a key", n)
	}

	// GET /api/v1/rejections, as a viewer.
	c := apiclient.New(r.base, viewerToken, nil)
	list := func(q apiclient.RejectionQuery) apiclient.RejectionPage {
		t.Helper()
		page, err := c.Rejections(context.Background(), q)
		if err != nil {
			t.Fatalf("GET /api/v1/rejections %+v: %v", q, err)
		}
		return page
	}
	all := list(apiclient.RejectionQuery{})
	got := map[uint64]string{}
	for _, rj := range all.Rejections {
		got[uint64(rj.StreamSeq)] = rj.Reason
	}
	if len(got) != len(want) {
		t.Errorf("rejections %v, want %v", got, want)
	}
	for seq, reason := range want {
		if got[seq] != reason {
			t.Errorf("message %d: %q, want %q", seq, got[seq], reason)
		}
	}
	if p := list(apiclient.RejectionQuery{Reason: store.RejectTenantMismatch}); len(p.Rejections) != 1 || p.Rejections[0].Tenant != "globex" {
		t.Errorf("reason=tenant_mismatch: %+v", p.Rejections)
	}
	if p := list(apiclient.RejectionQuery{Integration: "ghost"}); len(p.Rejections) != 1 || p.Rejections[0].Reason != store.RejectUnknownIntegration {
		t.Errorf("integration=ghost: %+v", p.Rejections)
	}
	if p := list(apiclient.RejectionQuery{ReplayID: rep.ID}); len(p.Rejections) != 1 || p.Rejections[0].Key != key("evt_b").String() {
		t.Errorf("replay_id=%s: %+v", rep.ID, p.Rejections)
	}
	// Pages.
	first := list(apiclient.RejectionQuery{Limit: 3})
	if len(first.Rejections) != 3 || first.NextCursor == "" {
		t.Fatalf("limit=3: %d rejections, cursor %q", len(first.Rejections), first.NextCursor)
	}
	if rest := list(apiclient.RejectionQuery{Limit: 3, Cursor: first.NextCursor}); len(rest.Rejections) != 2 || rest.NextCursor != "" {
		t.Errorf("second page: %d rejections, cursor %q", len(rest.Rejections), rest.NextCursor)
	}
	if code, _ := r.do(http.MethodGet, "/api/v1/rejections", "", nil); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401", code)
	}

	// The event detail of a key a rejected message claimed.
	ev, err := c.Event(context.Background(), "demo", "evt_b")
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Rejections) != 1 || ev.Rejections[0].Reason != store.RejectReplayNotCovering || ev.Rejections[0].ReplayID == nil ||
		*ev.Rejections[0].ReplayID != rep.ID {
		t.Errorf("evt_b's rejections: %+v", ev.Rejections)
	}

	// Reconcile: a rejected message has no inbox row on purpose; it is not
	// missing, and no fix replays it.
	res, err := c.Reconcile(context.Background(), apiclient.ReconcileQuery{FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Missing) != 0 || res.Fix != nil || res.Rejected != 3 {
		t.Errorf("reconcile: missing %v, fix %v, rejected %d; want none, none, 3 (the copies are no deliveries)", res.Missing, res.Fix, res.Rejected)
	}

	m := r.app.Metrics.ProcessorRejected
	for _, c := range []struct{ integration, reason string }{
		{"demo", store.RejectReplayNotCovering}, {"demo", store.RejectUnknownReplay}, {"demo", store.RejectTenantMismatch},
		{"demo", store.RejectSubjectMismatch}, {"", store.RejectUnknownIntegration},
	} {
		if n := testutil.ToFloat64(m.WithLabelValues(c.integration, c.reason)); n != 1 {
			t.Errorf("intake_processor_rejected_total{%q,%s} = %v, want 1", c.integration, c.reason, n)
		}
	}
}
