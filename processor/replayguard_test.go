package processor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

// TestReplayedBodiesInOneBatchApplyOnce: with replay_guard on, copies of one
// body under other ids that sit in one batch with the original apply
// nothing: recorded as replayed_body (naming the original), counted,
// terminated; the original's honest retry stays a duplicate. Without the
// guard each id is a new event.
func TestReplayedBodiesInOneBatchApplyOnce(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	// Everything is on INTAKE_IN before the processor starts: one fetch.
	r.publish("evt_1", `{"n":1}`, "")
	for _, id := range []string{"evt_2", "evt_3", "evt_4", "evt_5"} {
		r.publish(id, `{"n":1}`, "")
	}
	r.publish("evt_1", `{"n":1}`, "retry-past-window")
	r.publish("evt_6", `{"n":2}`, "") // another body: an event of its own

	on := true
	guarded := demo
	guarded.ReplayGuard = &on
	m := telemetry.NewMetrics()
	r.run(processor.Options{Metrics: m, Integrations: []config.Integration{guarded},
		Config: config.Processor{AckWait: 2 * time.Second, MaxDeliver: 10, Concurrency: 1}})
	r.tr.CaughtUp(t, 60*time.Second)

	if n := r.count(`SELECT count(*) FROM effects`); n != 2 {
		t.Errorf("%d business effects, want 2 (evt_1 and evt_6)", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.inbox`); n != 2 {
		t.Errorf("%d inbox rows, want 2: a replayed body reserves no id", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.rejected_messages
		WHERE reason = $1 AND original_account = 'main' AND original_event_id = 'evt_1'`, store.RejectReplayedBody); n != 4 {
		t.Errorf("%d replayed_body records naming evt_1, want 4", n)
	}
	if got := testutil.ToFloat64(m.ProcessorRejected.WithLabelValues("demo", store.RejectReplayedBody)); got != 4 {
		t.Errorf("intake_processor_rejected_total{reason=replayed_body} = %v, want 4", got)
	}
	if got := testutil.ToFloat64(m.Processed.WithLabelValues("demo", "duplicate")); got != 1 {
		t.Errorf("duplicates = %v, want 1 (the honest retry)", got)
	}
	list, err := r.store.EventReplayedBodies(t.Context(), key("evt_1"))
	if err != nil || len(list) != 4 || list[0].OriginalKey != key("evt_1").String() {
		t.Errorf("EventReplayedBodies(evt_1) = %d rows, %v", len(list), err)
	}
}

// TestUnguardedIntegrationAppliesEqualBodies: replay_guard off (the
// default of the rig's integration) writes no body hash and lets two ids
// with one body apply, as before.
func TestUnguardedIntegrationAppliesEqualBodies(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	r.publish("evt_1", `{"n":1}`, "")
	r.publish("evt_2", `{"n":1}`, "")
	r.run(processor.Options{})
	r.settled(2)
	if n := r.count(`SELECT count(*) FROM effects`); n != 2 {
		t.Errorf("%d business effects, want 2", n)
	}
	if n := r.count(`SELECT (SELECT count(*) FROM intake.body_hashes) + (SELECT count(*) FROM intake.body_type_hashes)`); n != 0 {
		t.Errorf("%d body hashes written for an unguarded integration, want 0", n)
	}
}

// TestCopyWhileTheOriginalAwaitsItsRetry: the original's handler fails once
// (its batch rolls back, body hash included); a copy of its body under a
// fresh id arrives before the retry. The copy is refused and the original
// applies on its retry — not the copy under its id, with the original
// refused as its replay.
func TestCopyWhileTheOriginalAwaitsItsRetry(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	fwd := processor.Forward()
	h := processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		if ev.Key.EventID == "evt_1" && ev.Delivery == 1 {
			return nil, errors.New("flaky downstream")
		}
		if _, err := tx.Exec(ctx, `INSERT INTO effects (key) VALUES ($1)`, ev.Key.String()); err != nil {
			return nil, err
		}
		return fwd.Handle(ctx, tx, ev)
	})
	on := true
	guarded := demo
	guarded.ReplayGuard = &on
	m := telemetry.NewMetrics()
	r.run(processor.Options{Metrics: m, Handler: h, Integrations: []config.Integration{guarded},
		Config: config.Processor{AckWait: 2 * time.Second, MaxDeliver: 10, Concurrency: 1, Backoff: []time.Duration{2 * time.Second}}})
	r.publish("evt_1", `{"n":1}`, "")
	// The retry is 2s away: the copy lands before it.
	testenv.Eventually(t, 10*time.Second, func() bool { return testutil.ToFloat64(m.Failures.WithLabelValues("demo", "retry", "")) == 1 },
		"the failure was never counted")
	r.publish("evt_2", `{"n":1}`, "")
	r.settled(1)
	r.tr.CaughtUp(t, 60*time.Second)

	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_1").String()); n != 1 {
		t.Errorf("the original applied %d times, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM effects`); n != 1 {
		t.Errorf("%d business effects, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.rejected_messages WHERE event_id = 'evt_2' AND original_event_id = 'evt_1'`); n != 1 {
		t.Errorf("the copy evt_2 is not recorded as a replay of evt_1")
	}
}

// guardedRig is setup with the processor running on the demo integration
// with replay_guard on.
func guardedRig(t *testing.T, m *telemetry.Metrics) *rig {
	t.Helper()
	r := setup(t, "")
	on := true
	guarded := demo
	guarded.ReplayGuard = &on
	r.run(processor.Options{Metrics: m, Integrations: []config.Integration{guarded},
		Config: config.Processor{AckWait: 2 * time.Second, MaxDeliver: 10, Concurrency: 1}})
	return r
}

// TestSameBodyAsAnotherTypeApplies is issue 36's genuine pair: two events
// of two types with byte-identical bodies (Shopify's orders/create and
// orders/updated) both apply; the guard keys on the body and the type. A
// third delivery of the body under a fresh id and one of those types is
// still a captured copy: refused, naming the event of its type. Keyed on
// the body alone, orders/updated was answered 200 and never applied.
func TestSameBodyAsAnotherTypeApplies(t *testing.T) {
	t.Parallel()
	m := telemetry.NewMetrics()
	r := guardedRig(t, m)
	const body = `{"id":820982911946154508,"cancelled_at":null}`
	r.publishTyped("evt_create", "orders/create", body, "")
	r.settled(1)
	r.publishTyped("evt_update", "orders/updated", body, "")
	r.settled(2)
	r.publishTyped("evt_copy", "orders/updated", body, "")
	r.tr.CaughtUp(t, 60*time.Second)

	for _, id := range []string{"evt_create", "evt_update"} {
		if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key(id).String()); n != 1 {
			t.Errorf("%s applied %d times, want 1", id, n)
		}
	}
	if n := r.count(`SELECT count(*) FROM intake.inbox`); n != 2 {
		t.Errorf("%d inbox rows, want 2 (the copy reserves no id)", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.rejected_messages
		WHERE event_id = 'evt_copy' AND reason = $1 AND original_event_id = 'evt_update'`, store.RejectReplayedBody); n != 1 {
		t.Errorf("the copy of orders/updated is recorded %d times as a replay of evt_update, want 1", n)
	}
	if got := testutil.ToFloat64(m.ProcessorRejected.WithLabelValues("demo", store.RejectReplayedBody)); got != 1 {
		t.Errorf("intake_processor_rejected_total{reason=replayed_body} = %v, want 1", got)
	}
	if n := r.count(`SELECT count(*) FROM intake.body_type_hashes WHERE event_type IN ('orders/create', 'orders/updated')`); n != 2 {
		t.Errorf("%d body hash rows, want 2 (one per type)", n)
	}
}

// TestLegacyBodyRowGuardsEveryType: a body_hashes row — recorded before
// migration 00017, or during the roll by a 0.16 processor, whose statement
// this is verbatim — guards its body under every type until the purge
// removes it: no delivery of the body applies under another id, whatever
// its type, and none records a row of its type in body_type_hashes. Another
// body applies as usual.
func TestLegacyBodyRowGuardsEveryType(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	const body = `{"n":1}`
	sha := envelope.PayloadSHA256([]byte(body))
	for _, id := range []string{"evt_0", "evt_0_copy"} {
		if _, err := r.db.Exec(t.Context(), `INSERT INTO intake.body_hashes (integration, payload_sha256, account, event_id)
		VALUES ($1, $2, $3, $4) ON CONFLICT (integration, payload_sha256) DO NOTHING`, "demo", sha, "main", id); err != nil {
			t.Fatalf("0.16's guard statement after migration 00017: %v", err)
		}
	}
	r.publishTyped("evt_1", "thing.happened", body, "")
	r.publishTyped("evt_2", "other.thing", body, "")
	r.publishTyped("evt_3", "thing.happened", `{"n":2}`, "")
	on := true
	guarded := demo
	guarded.ReplayGuard = &on
	r.run(processor.Options{Integrations: []config.Integration{guarded}})
	r.tr.CaughtUp(t, 60*time.Second)

	if n := r.count(`SELECT count(*) FROM effects`); n != 1 {
		t.Errorf("%d business effects, want 1 (evt_3)", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.rejected_messages
		WHERE reason = $1 AND original_event_id = 'evt_0' AND event_id IN ('evt_1', 'evt_2')`, store.RejectReplayedBody); n != 2 {
		t.Errorf("%d deliveries recorded as replays of evt_0, want 2", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.body_hashes WHERE payload_sha256 = $1`, sha); n != 1 {
		t.Errorf("%d body_hashes rows of the legacy body, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.body_type_hashes WHERE payload_sha256 = $1`, sha); n != 0 {
		t.Errorf("%d body_type_hashes rows of the legacy body, want none", n)
	}
}

// TestOperatorAdmitsARefusedDelivery: a delivery the guard refused is
// never lost for good. A replay of its key that does not admit replayed
// bodies is refused again; one recorded with admit_replayed_bodies applies
// it, once, under its own key — the operator's deliberate act.
func TestOperatorAdmitsARefusedDelivery(t *testing.T) {
	t.Parallel()
	m := telemetry.NewMetrics()
	r := guardedRig(t, m)
	r.publishTyped("evt_1", "thing.happened", `{"n":1}`, "")
	r.settled(1)
	seq := r.publishTyped("evt_2", "thing.happened", `{"n":1}`, "")
	r.tr.CaughtUp(t, 60*time.Second)
	refused := func() int {
		return r.count(`SELECT count(*) FROM intake.rejected_messages WHERE event_id = 'evt_2' AND reason = $1`, store.RejectReplayedBody)
	}
	if n := refused(); n != 1 {
		t.Fatalf("evt_2 refused %d times, want 1", n)
	}

	r.replayWith(seq, store.Replay{Mode: string(inbox.ReplayExact)})
	r.tr.CaughtUp(t, 60*time.Second)
	if n := refused(); n != 2 {
		t.Errorf("evt_2 refused %d times after a replay without admission, want 2", n)
	}
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_2").String()); n != 0 {
		t.Fatalf("evt_2 applied %d times without admission", n)
	}

	r.replayWith(seq, store.Replay{Mode: string(inbox.ReplayExact), AdmitReplayedBodies: true})
	r.settled(2)
	r.tr.CaughtUp(t, 60*time.Second)
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_2").String()); n != 1 {
		t.Errorf("evt_2 applied %d times after the admitting replay, want 1", n)
	}
	if n := refused(); n != 2 {
		t.Errorf("evt_2 refused %d times, want still 2", n)
	}
	if n := r.count(`SELECT count(*) FROM effects`); n != 2 {
		t.Errorf("%d business effects, want 2", n)
	}
}
