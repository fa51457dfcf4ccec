package processor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

// The processor trusts no envelope it can check: whoever may publish to
// intake.in.> can write any header. These tests publish what such a
// publisher could and expect nothing applied, every message recorded in
// intake.rejected_messages, counted and terminated.

// processedCopy returns the INTAKE_IN message of key id (the first), as a
// message to publish again.
func (r *rig) processedCopy(id string) *nats.Msg {
	r.t.Helper()
	return r.tr.DeliveryOf(r.t, key(id).String())
}

func (r *rig) publishMsg(m *nats.Msg) uint64 {
	r.t.Helper()
	return r.tr.Publish(r.t, m)
}

// rejections returns the recorded reasons by stream sequence.
func (r *rig) rejections() map[uint64]string {
	r.t.Helper()
	rows, err := r.db.Query(context.Background(), `SELECT stream_seq, reason FROM intake.rejected_messages`)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	out := map[uint64]string{}
	for rows.Next() {
		var seq int64
		var reason string
		if err := rows.Scan(&seq, &reason); err != nil {
			r.t.Fatal(err)
		}
		out[uint64(seq)] = reason
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// waitRejected waits until the processor has settled every message (acked
// or terminated: a rejection is recorded before its Term) and checks that
// want is what is recorded (stream sequence → reason).
func (r *rig) waitRejected(want map[uint64]string) {
	r.t.Helper()
	r.tr.CaughtUp(r.t, 60*time.Second)
	got := r.rejections()
	if len(got) != len(want) {
		r.t.Errorf("rejections %v, want %v", got, want)
	}
	for seq, reason := range want {
		if got[seq] != reason {
			r.t.Errorf("message %d: rejected %q, want %q (all: %v)", seq, got[seq], reason, got)
		}
	}
}

func TestForgedReplayAppliesNothing(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	m := telemetry.NewMetrics()
	r.run(processor.Options{Metrics: m})
	r.publish("evt_1", `{"n":1}`, "")
	r.settled(1)

	// The attack of issue 13: a copy of the processed message, made a
	// re-execution by an invented replay id.
	forged := r.processedCopy("evt_1")
	forged.Header.Set(envelope.HeaderReplayMode, string(inbox.ReplayReexecute))
	forged.Header.Set(envelope.HeaderReplayID, uuid.NewString())
	forged.Header.Set(envelope.HeaderMsgID, "forged-1")
	a := r.publishMsg(forged)
	// The same as an exact replay with an id that is no replay's at all.
	forged = r.processedCopy("evt_1")
	forged.Header.Set(envelope.HeaderReplayMode, string(inbox.ReplayExact))
	forged.Header.Set(envelope.HeaderReplayID, "not-a-replay")
	forged.Header.Set(envelope.HeaderMsgID, "forged-2")
	b := r.publishMsg(forged)

	r.waitRejected(map[uint64]string{a: store.RejectUnknownReplay, b: store.RejectUnknownReplay})
	if n := r.count(`SELECT count(*) FROM effects`); n != 1 {
		t.Errorf("%d effects, want 1: a forged replay ran the handler", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.executions`); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
	if n := testutil.ToFloat64(m.ProcessorRejected.WithLabelValues("demo", store.RejectUnknownReplay)); n != 2 {
		t.Errorf("intake_processor_rejected_total{demo,unknown_replay} = %v, want 2", n)
	}
	var mode, replayID string
	if err := r.db.QueryRow(context.Background(), `SELECT replay_mode, replay_id FROM intake.rejected_messages WHERE stream_seq = $1`,
		int64(a)).Scan(&mode, &replayID); err != nil || mode != "reexecute" || replayID == "" {
		t.Errorf("recorded replay mode %q id %q (%v), want reexecute and the forged id", mode, replayID, err)
	}
}

func TestReplayNotCoveringTheKeyAppliesNothing(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	m := telemetry.NewMetrics()
	r.run(processor.Options{Metrics: m})
	r.publish("evt_1", `{"n":1}`, "")
	r.publish("evt_2", `{"n":2}`, "")
	r.settled(2)

	// A re-execution recorded as the replayer records one, selecting evt_1
	// only (the replayer itself is not running: its copies are ours).
	ctx := context.Background()
	id := uuid.NewString()
	sel, _ := json.Marshal(map[string]any{"keys": []string{key("evt_1").String()}})
	copyID := func(k envelope.Key) string { return "replay:" + id + ":" + k.String() }
	if err := r.store.CreateReplay(ctx, &store.Replay{ID: id, RequestedBy: "ops", Selector: sel, Mode: "reexecute",
		Reason: "test", Rate: 10, State: store.ReplayRunning, Matched: 1},
		[]store.ReplayItem{{Key: key("evt_1"), Tenant: "acme", EventType: "thing.happened", StreamSeq: 1,
			MsgID: copyID(key("evt_1")), Outcome: "would_apply"}}); err != nil {
		t.Fatal(err)
	}
	copyOf := func(evt, msgID string) *nats.Msg {
		c := r.processedCopy(evt)
		c.Header.Set(envelope.HeaderReplayMode, string(inbox.ReplayReexecute))
		c.Header.Set(envelope.HeaderReplayID, id)
		c.Header.Set(envelope.HeaderMsgID, msgID)
		return c
	}
	// The replay's id on a key it did not select…
	other := r.publishMsg(copyOf("evt_2", copyID(key("evt_2"))))
	// …and on its own key, but under a Nats-Msg-Id that is not its copy's.
	again := r.publishMsg(copyOf("evt_1", "replayed-again"))
	// Its own copy applies.
	genuine := r.publishMsg(copyOf("evt_1", copyID(key("evt_1"))))

	r.waitRejected(map[uint64]string{other: store.RejectReplayNotCovering, again: store.RejectReplayNotCovering})
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_2").String()); n != 1 {
		t.Errorf("evt_2: %d effects, want 1: a replay ran a key it did not select", n)
	}
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_1").String()); n != 2 {
		t.Errorf("evt_1: %d effects, want 2 (the original and the replay's re-execution)", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.executions WHERE replay_id = $1 AND stream_seq = $2`, id, int64(genuine)); n != 1 {
		t.Errorf("%d executions of the genuine copy, want 1", n)
	}
	if n := testutil.ToFloat64(m.ProcessorRejected.WithLabelValues("demo", store.RejectReplayNotCovering)); n != 2 {
		t.Errorf("intake_processor_rejected_total{demo,replay_not_covering} = %v, want 2", n)
	}

	// A replay whose copy of evt_2 is recorded at another sequence: a copy
	// with its very Nats-Msg-Id elsewhere in the stream was published again
	// (past the stream's duplicate window) and is not the replay's copy.
	id2 := uuid.NewString()
	if err := r.store.CreateReplay(ctx, &store.Replay{ID: id2, RequestedBy: "ops", Selector: sel, Mode: "reexecute",
		Reason: "test", Rate: 10, State: store.ReplayRunning, Matched: 1},
		[]store.ReplayItem{{Key: key("evt_2"), Tenant: "acme", EventType: "thing.happened", StreamSeq: 2,
			MsgID: "replay:" + id2 + ":" + key("evt_2").String(), Outcome: "would_apply"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.db.Exec(ctx, `UPDATE intake.replay_items SET state = 'published', published_seq = 1000 WHERE replay_id = $1`, id2); err != nil {
		t.Fatal(err)
	}
	c := r.processedCopy("evt_2")
	c.Header.Set(envelope.HeaderReplayMode, string(inbox.ReplayReexecute))
	c.Header.Set(envelope.HeaderReplayID, id2)
	c.Header.Set(envelope.HeaderMsgID, "replay:"+id2+":"+key("evt_2").String())
	reused := r.publishMsg(c)
	r.waitRejected(map[uint64]string{other: store.RejectReplayNotCovering, again: store.RejectReplayNotCovering,
		reused: store.RejectReplayNotCovering})
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_2").String()); n != 1 {
		t.Errorf("evt_2: %d effects, want 1", n)
	}
	var detail string
	if err := r.db.QueryRow(ctx, `SELECT detail FROM intake.rejected_messages WHERE stream_seq = $1`, int64(reused)).Scan(&detail); err != nil ||
		!strings.Contains(detail, "1000") {
		t.Errorf("detail %q (%v), want the recorded sequence 1000", detail, err)
	}
}

func TestEnvelopeContradictingTheConfigAppliesNothing(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	m := telemetry.NewMetrics()
	r.run(processor.Options{Metrics: m})

	delivery := func(k envelope.Key, tenant string) *nats.Msg {
		return envelope.NewDelivery(k, tenant, "thing.happened", []byte(`{"forged":true}`), time.Now()).Msg()
	}
	// A brand-new event for a tenant that is not the integration's, with
	// a made-up payload hash (the second attack).
	tenant := delivery(key("evt_t"), "globex")
	tenant.Header.Set(envelope.HeaderPayloadSHA256, "0000")
	// An integration nobody configured.
	ghost := delivery(envelope.Key{Integration: "ghost", Account: "main", EventID: "evt_g"}, "acme")
	// A demo key on another integration's subject.
	subject := delivery(key("evt_s"), "acme")
	subject.Subject = envelope.SubjectIn("other", "thing.happened")

	want := map[uint64]string{
		r.publishMsg(tenant):  store.RejectTenantMismatch,
		r.publishMsg(ghost):   store.RejectUnknownIntegration,
		r.publishMsg(subject): store.RejectSubjectMismatch,
	}
	r.publish("evt_ok", `{"n":1}`, "") // in the same batches: applies
	r.waitRejected(want)
	if n := r.count(`SELECT count(*) FROM intake.inbox`); n != 1 {
		t.Errorf("%d inbox rows, want 1 (evt_ok's): a rejected message claimed a key", n)
	}
	if n := r.count(`SELECT count(*) FROM effects`); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
	for _, c := range []struct{ integration, reason string }{
		{"demo", store.RejectTenantMismatch}, {"demo", store.RejectSubjectMismatch},
		// An unconfigured integration's name is no label value: anyone
		// could mint them.
		{"", store.RejectUnknownIntegration},
	} {
		if n := testutil.ToFloat64(m.ProcessorRejected.WithLabelValues(c.integration, c.reason)); n != 1 {
			t.Errorf("intake_processor_rejected_total{%q,%s} = %v, want 1", c.integration, c.reason, n)
		}
	}
	var tenantSeen, sha string
	if err := r.db.QueryRow(context.Background(), `SELECT tenant, payload_sha256 FROM intake.rejected_messages
		WHERE reason = $1`, store.RejectTenantMismatch).Scan(&tenantSeen, &sha); err != nil || tenantSeen != "globex" || sha != "0000" {
		t.Errorf("recorded tenant %q hash %q (%v), want the message's globex and 0000", tenantSeen, sha, err)
	}
}

// TestMalformedEnvelopesAreTerminatedAndNothingStalls: identity values no
// configuration can hold — invalid UTF-8, control characters, key parts
// past their bounds — are terminated before any query: they cannot fail
// the screen's statements, overflow an index, mint or break a metric
// label, or hold the consumer's ack floor back.
func TestMalformedEnvelopesAreTerminatedAndNothingStalls(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	m := telemetry.NewMetrics()
	r.run(processor.Options{Metrics: m})
	r.publish("evt_1", `{"n":1}`, "")
	r.settled(1)

	long := strings.Repeat("長", 400) // 1,200 bytes
	forged := []*nats.Msg{}
	badUTF8 := r.processedCopy("evt_1") // a replay copy whose key breaks the screen's query
	badUTF8.Header.Set(envelope.HeaderKey, "demo/main/\xff\xfe")
	badUTF8.Header.Set(envelope.HeaderReplayMode, "reexecute")
	badUTF8.Header.Set(envelope.HeaderReplayID, "00000000-0000-4000-8000-000000000001")
	badUTF8.Header.Set(envelope.HeaderMsgID, "bad-utf8")
	forged = append(forged, badUTF8)
	for _, k := range []envelope.Key{
		{Integration: "ghost" + long, Account: long, EventID: long}, // overflows an index row
		{Integration: "\xff" + long, Account: "main", EventID: "x"}, // not a label value
		{Integration: "demo", Account: "main", EventID: "evt\u202eexe.txt"},
		{Integration: "demo", Account: "main", EventID: "evt\x00nul"},
	} {
		forged = append(forged, envelope.NewDelivery(k, "acme", "thing.happened", []byte(`{}`), time.Now()).Msg())
	}
	for _, f := range forged {
		r.publishMsg(f)
	}
	r.publish("evt_2", `{"n":2}`, "")
	r.tr.CaughtUp(t, 30*time.Second) // the ack floor passed every forged message
	r.settled(2)
	if n := testutil.ToFloat64(m.Failures.WithLabelValues("", "malformed", "")); n != float64(len(forged)) {
		t.Fatalf("%v malformed messages terminated, want %d", n, len(forged))
	}
	if n := r.count(`SELECT count(*) FROM effects`); n != 2 {
		t.Fatalf("%d business effects, want the 2 genuine events'", n)
	}
}

// TestAReplayRunsAKeyOnceAndEndedReplaysCoverNothing: the coverage check
// cannot be reused. Another copy of the same replay (published again once
// the stream's duplicate window has passed) is a redelivery, not a second
// run; and the unpublished item of a replay that ended covers nothing.
func TestAReplayRunsAKeyOnceAndEndedReplaysCoverNothing(t *testing.T) {
	t.Parallel()
	r := setupWith(t, testrig.Options{Mutate: func(c *config.Config) {
		s := testrig.TestStream()
		s.DuplicateWindow = time.Second // so a copy can be published again
		c.NATS.Stream = s
	}})
	m := telemetry.NewMetrics()
	r.run(processor.Options{Metrics: m})
	r.publish("evt_1", `{"n":1}`, "")
	r.settled(1)

	ctx := context.Background()
	replayID, msgID := r.runningReexecution("evt_1")
	copyOf := func() *nats.Msg {
		c := r.processedCopy("evt_1")
		c.Header.Set(envelope.HeaderReplayMode, string(inbox.ReplayReexecute))
		c.Header.Set(envelope.HeaderReplayID, replayID)
		c.Header.Set(envelope.HeaderMsgID, msgID)
		return c
	}
	// publishAgain publishes a copy once the stream no longer drops its id.
	publishAgain := func() uint64 {
		var seq uint64
		testenv.Eventually(t, 10*time.Second, func() bool {
			ack, err := r.js.PublishMsg(ctx, copyOf())
			if err != nil {
				t.Fatal(err)
			}
			seq = ack.Sequence
			return !ack.Duplicate
		}, "the stream kept dropping the copy's id")
		return seq
	}

	r.publishMsg(copyOf()) // the replay's genuine copy (its seq not recorded yet): runs
	r.tr.CaughtUp(t, 30*time.Second)
	second := publishAgain() // the same replay's copy again: a redelivery
	r.tr.CaughtUp(t, 30*time.Second)
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_1").String()); n != 2 {
		t.Fatalf("%d business effects after the replay's copy %d came again, want 2 (original + one re-execution)", n, second)
	}

	if _, err := r.db.Exec(ctx, `UPDATE intake.replays SET state = 'cancelled' WHERE id = $1`, replayID); err != nil {
		t.Fatal(err)
	}
	third := publishAgain() // the cancelled replay's unpublished item: covers nothing
	r.tr.CaughtUp(t, 30*time.Second)
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, key("evt_1").String()); n != 2 {
		t.Fatalf("%d business effects, want 2", n)
	}
	if got := r.rejections()[third]; got != store.RejectReplayNotCovering {
		t.Fatalf("the cancelled replay's copy at %d: rejection %q, want %s", third, got, store.RejectReplayNotCovering)
	}
}

// TestAReplayCopyWithAnotherBodyAppliesNothing: a copy that a recorded,
// running replay covers, but whose body is not the one its hash header
// names, is refused: the replayer copies source messages as they are.
func TestAReplayCopyWithAnotherBodyAppliesNothing(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	r.run(processor.Options{Metrics: telemetry.NewMetrics()})
	r.publish("evt_1", `{"n":1}`, "")
	r.settled(1)
	replayID, msgID := r.runningReexecution("evt_1")
	c := r.processedCopy("evt_1")
	c.Header.Set(envelope.HeaderReplayMode, string(inbox.ReplayReexecute))
	c.Header.Set(envelope.HeaderReplayID, replayID)
	c.Header.Set(envelope.HeaderMsgID, msgID)
	c.Data = []byte(`{"attacker":"body"}`) // the original hash header kept
	seq := r.publishMsg(c)
	r.tr.CaughtUp(t, 30*time.Second)
	if n := r.count(`SELECT count(*) FROM effects`); n != 1 {
		t.Fatalf("%d business effects, want the original's 1", n)
	}
	if got := r.rejections()[seq]; got != store.RejectPayloadMismatch {
		t.Fatalf("rejection %q, want %s", got, store.RejectPayloadMismatch)
	}
}

// runningReexecution records a running re-execution replay that selected
// key id, as the replayer records one before it publishes, and returns its
// id and its copy's Nats-Msg-Id.
func (r *rig) runningReexecution(id string) (replayID, msgID string) {
	r.t.Helper()
	replayID = store.NewID()
	msgID = "replay:" + replayID + ":" + key(id).String()
	if err := r.store.CreateReplay(context.Background(), &store.Replay{ID: replayID, RequestedBy: "ops", Selector: []byte(`{}`),
		Mode: string(inbox.ReplayReexecute), Reason: "test", Rate: 10, State: store.ReplayRunning, Matched: 1},
		[]store.ReplayItem{{Key: key(id), Tenant: "acme", EventType: "thing.happened", StreamSeq: 1,
			MsgID: msgID, Outcome: "would_apply"}}); err != nil {
		r.t.Fatal(err)
	}
	return replayID, msgID
}
