package processor_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

// Issue 30's last residual: whoever may publish to intake.in.> could write
// a far-future Intake-Object-Version and freeze the object. With envelope
// keys the processor applies only what ingress signed.

const envelopeKey = "envelope-key-for-tests-0123456789abcdef"

// keyed is the Envelope section of these tests; require nil: its default.
func keyed(require *bool) config.Envelope {
	return config.Envelope{Keys: []string{envelopeKey}, Require: require}
}

// versioned is an update of object cus_1 at version, as ingress builds it;
// signed as ingress signs it when sign.
func versioned(id string, version int64, sign bool) *nats.Msg {
	d := envelope.NewDelivery(key(id), "acme", "customer.updated", []byte(fmt.Sprintf(`{"v":%d}`, version)), time.Now())
	d.ObjectID, d.ObjectVersion = "cus_1", version
	m := d.Msg()
	if sign {
		m.Header.Set(envelope.HeaderSignature, envelope.Sign([]byte(envelopeKey), m.Header))
	}
	return m
}

func TestForgedObjectVersionCannotFreezeAnObject(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	m := telemetry.NewMetrics()
	r.run(processor.Options{Metrics: m, Envelope: keyed(nil)})
	r.publishMsg(versioned("evt_v1", 1, true))
	r.settled(1)

	// The attack: a far-future version for the existing object, unsigned,
	// or signed with a key that is not ingress's, or genuine headers with
	// the version raised.
	unsigned := r.publishMsg(versioned("evt_forged_1", 1<<62, false))
	badKey := versioned("evt_forged_2", 1<<62, false)
	badKey.Header.Set(envelope.HeaderSignature, envelope.Sign([]byte("not-the-envelope-key-0123456789abcdef"), badKey.Header))
	raised := versioned("evt_forged_3", 2, true)
	raised.Header.Set(envelope.HeaderObjectVersion, fmt.Sprint(int64(1)<<62))
	want := map[uint64]string{
		unsigned:             store.RejectUnsignedEnvelope,
		r.publishMsg(badKey): store.RejectBadEnvelopeSignature,
		r.publishMsg(raised): store.RejectBadEnvelopeSignature,
	}
	r.waitRejected(want)

	// The next genuine update applies: the object is not frozen.
	r.publishMsg(versioned("evt_v2", 2, true))
	r.tr.CaughtUp(t, 60*time.Second)
	if n := r.count(`SELECT count(*) FROM intake.inbox WHERE event_id = 'evt_v2' AND status = 'stale'`); n != 0 {
		t.Fatal("the genuine update was stale: a forged version froze the object")
	}
	if n := r.count(`SELECT version FROM intake.object_versions WHERE object_id = 'cus_1'`); n != 2 {
		t.Errorf("stored version %d, want 2", n)
	}
	if n := r.count(`SELECT count(*) FROM effects`); n != 2 {
		t.Errorf("%d effects, want 2 (v1, v2)", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.inbox WHERE event_id LIKE 'evt_forged%'`); n != 0 {
		t.Errorf("%d forged messages claimed a key", n)
	}
	for reason, want := range map[string]float64{store.RejectUnsignedEnvelope: 1, store.RejectBadEnvelopeSignature: 2} {
		if n := testutil.ToFloat64(m.ProcessorRejected.WithLabelValues("demo", reason)); n != want {
			t.Errorf("intake_processor_rejected_total{demo,%s} = %v, want %v", reason, n, want)
		}
	}
}

func TestSignedEnvelopeWithASwappedBodyIsRefused(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	r.run(processor.Options{Envelope: keyed(nil)})
	swapped := versioned("evt_s", 5, true)
	swapped.Data = []byte(`{"v":999}`) // genuine headers, another body
	seq := r.publishMsg(swapped)
	r.publishMsg(versioned("evt_ok", 1, true))
	r.waitRejected(map[uint64]string{seq: store.RejectPayloadMismatch})
	if n := r.count(`SELECT count(*) FROM effects`); n != 1 {
		t.Errorf("%d effects, want 1 (evt_ok's)", n)
	}
}

func TestReplayCopyOfASignedEventVerifies(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	r.run(processor.Options{Envelope: keyed(nil)})
	seq := r.publishMsg(versioned("evt_1", 1, true))
	r.settled(1)
	// The replayer's copy: the original's headers and body, a new
	// Nats-Msg-Id and Intake-Replay-Id/Mode.
	r.replay(seq, inbox.ReplayReexecute)
	r.waitRejected(map[uint64]string{})
	if n := r.count(`SELECT count(*) FROM effects`); n != 2 {
		t.Errorf("%d effects, want 2 (the original and the re-execution)", n)
	}
}

func TestUnsignedEnvelopesAreCountedWhileNotRequired(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	m := telemetry.NewMetrics()
	off := false
	r.run(processor.Options{Metrics: m, Envelope: keyed(&off)})
	r.publishMsg(versioned("evt_1", 1, false)) // an ingress pod without keys yet
	r.publishMsg(versioned("evt_2", 2, true))
	bad := versioned("evt_3", 3, false)
	bad.Header.Set(envelope.HeaderSignature, "v1=forged")
	seq := r.publishMsg(bad) // a bad signature is refused all the same
	r.waitRejected(map[uint64]string{seq: store.RejectBadEnvelopeSignature})
	r.settled(2)
	if n := testutil.ToFloat64(m.UnsignedEnvelopes.WithLabelValues("demo")); n != 1 {
		t.Errorf("intake_processor_unsigned_envelopes_total{demo} = %v, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM effects`); n != 2 {
		t.Errorf("%d effects, want 2", n)
	}
}

func TestEnvelopeKeysAreValidated(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	on := true
	for _, e := range []config.Envelope{{Keys: []string{"short"}}, {Require: &on}} {
		if _, err := processor.New(processor.Options{Store: r.store, JS: r.js, Envelope: e}); err == nil {
			t.Errorf("%+v: no error", e)
		}
	}
}
