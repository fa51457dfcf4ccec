package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

// Whoever may publish to intake.in.> can write any envelope: the headers are
// the publisher's word. Before the inbox decision the processor checks what
// it can against its own configuration and the replays recorded in
// Postgres; a message that fails is recorded (intake.rejected_messages),
// counted, logged and terminated after the commit — never applied.

// screen runs the envelope checks on b inside the batch's transaction and
// sets each refused item's reject; one query for the batch's replay copies.
func (p *Processor) screen(ctx context.Context, tx pgx.Tx, b []*item) error {
	var (
		copies []store.ReplayCopy
		of     []*item
	)
	for _, it := range b {
		it.reject, it.admitted, it.unsigned = nil, false, false
		if reason, detail := p.checkEnvelope(it); reason != "" {
			it.reject = it.ev.rejection(it.msg.Subject(), reason, detail)
			continue
		}
		if reason, detail := p.envelopeVerdict(it); reason != "" {
			it.reject = it.ev.rejection(it.msg.Subject(), reason, detail)
			continue
		}
		it.unsigned = it.sig.unsigned
		if ev := it.ev; ev.ReplayID != "" && p.verifier == nil {
			// Replay copies are rare: hashing their bodies again is cheap
			// and keeps a forged body out under a genuine copy's headers.
			// With envelope keys every body was hashed (envelopeVerdict).
			if envelope.PayloadSHA256(ev.Body) != ev.PayloadSHA256 {
				it.reject = it.ev.rejection(it.msg.Subject(), store.RejectPayloadMismatch, "the body does not hash to "+envelope.HeaderPayloadSHA256)
				continue
			}
		}
		if ev := it.ev; ev.ReplayID != "" {
			copies = append(copies, store.ReplayCopy{ReplayID: ev.ReplayID, Mode: string(ev.ReplayMode), Key: ev.Key,
				MsgID: ev.Header.Get(envelope.HeaderMsgID), StreamSeq: ev.StreamSeq})
			of = append(of, it)
		}
	}
	if len(copies) == 0 {
		return nil
	}
	checks, err := store.CheckReplayCopies(ctx, tx, copies)
	if err != nil {
		return err
	}
	for j, it := range of {
		if c := checks[j]; c.Reason != "" {
			it.reject = it.ev.rejection(it.msg.Subject(), c.Reason, c.Detail)
		} else {
			it.admitted = c.AdmitReplayedBody
		}
	}
	return nil
}

// verifyEnvelopes computes each message's envelopeVerdict before the batch's
// transaction begins: an HMAC and a body hash per message are CPU work that
// need not hold a transaction (and its row locks) open, nor be redone when
// the transaction is retried.
func (p *Processor) verifyEnvelopes(b []*item) {
	for _, it := range b {
		p.envelopeVerdict(it)
	}
}

// envelopeVerifier is nil without keys: nothing to verify.
func envelopeVerifier(keys [][]byte) *envelope.Verifier {
	if len(keys) == 0 {
		return nil
	}
	return envelope.NewVerifier(keys)
}

// envelopeVerdict is what the envelope keys say of it, computed once: with
// keys configured, a bad Intake-Envelope-Signature is always refused, a
// missing one when envelope.require is on (else it is let through and
// counted: sig.unsigned), and the body must hash to Intake-Payload-Sha256,
// since the signature covers the hash, not the body: else a publisher
// could keep a genuine message's headers and swap its body. Replay copies
// carry the original's headers, signature included, and verify as it does.
func (p *Processor) envelopeVerdict(it *item) (reason, detail string) {
	if p.verifier == nil {
		return "", ""
	}
	if !it.sig.done {
		it.sig.done = true
		it.sig.reason, it.sig.detail, it.sig.unsigned = p.checkSignature(it.ev)
	}
	return it.sig.reason, it.sig.detail
}

func (p *Processor) checkSignature(ev *Event) (reason, detail string, unsigned bool) {
	switch err := p.verifier.Verify(ev.Header); {
	case errors.Is(err, envelope.ErrUnsigned) && !p.requireSigned:
		unsigned = true
	case errors.Is(err, envelope.ErrUnsigned):
		return store.RejectUnsignedEnvelope, "no " + envelope.HeaderSignature + " and envelope.require is on", false
	case err != nil:
		return store.RejectBadEnvelopeSignature, envelope.HeaderSignature + " does not verify with any envelope key", false
	}
	if envelope.PayloadSHA256(ev.Body) != ev.PayloadSHA256 {
		return store.RejectPayloadMismatch, "the body does not hash to " + envelope.HeaderPayloadSHA256, false
	}
	return "", "", unsigned
}

// checkEnvelope checks a message against the configured integrations.
func (p *Processor) checkEnvelope(it *item) (reason, detail string) {
	return checkEnvelope(p.integrations, it.ev.Key, it.ev.Tenant, it.msg.Subject())
}

// checkEnvelope: the key's integration is configured, the tenant is its
// tenant, the subject is its (intake.in.{integration}.>).
func checkEnvelope(integrations map[string]*integration, k envelope.Key, tenant, subject string) (reason, detail string) {
	in, ok := integrations[k.Integration]
	switch {
	case !ok:
		return store.RejectUnknownIntegration, fmt.Sprintf("integration %q is not configured", k.Integration)
	case tenant != in.tenant:
		return store.RejectTenantMismatch, fmt.Sprintf("tenant %q is not the integration's (%q)", tenant, in.tenant)
	case !envelope.IsSubjectIn(subject, in.name):
		return store.RejectSubjectMismatch, fmt.Sprintf("subject is not under %s>", envelope.SubjectInPrefix(in.name))
	}
	return "", ""
}

// rejected counts, logs (never the body) and terminates a refused message,
// once its record is committed.
func (p *Processor) rejected(it *item) {
	r, ev := it.reject, it.ev
	label := ""
	if _, ok := p.integrations[ev.Key.Integration]; ok {
		label = ev.Key.Integration
	}
	p.o.Metrics.ProcessorRejected.WithLabelValues(label, r.Reason).Inc()
	outcome := "rejected: " + r.Reason
	it.settled(outcome, true)
	p.o.Log.Warn("rejected message: not applied", it.logArgs("reason", r.Reason, "detail", r.Detail, "key", ev.Key.String(),
		"tenant", ev.Tenant, "subject", r.Subject, "stream_seq", ev.StreamSeq, replayIDLog(ev.ReplayID), "replay_mode", string(ev.ReplayMode))...)
	if err := it.msg.TermWithReason(outcome); err != nil {
		// The record stands; a redelivery is screened and recorded once.
		p.o.Log.Warn("term failed after commit", "key", ev.Key.String(), "err", err)
	}
}

// malformed records (intake.rejected_messages, store.RejectMalformed) and
// terminates a message decode refused: not something ingress or the
// replayer wrote, so retrying cannot help. Recorded, reconcile counts it
// rejected instead of missing, and the re-drive never republishes it with
// the offending header repaired. It stays in INTAKE_IN for inspection.
// While the record cannot be written the message stays unacked, like a
// batch in an outage.
func (p *Processor) malformed(shutdown, work context.Context, m jetstream.Msg, cause error) {
	p.o.Metrics.Failures.WithLabelValues("", "malformed", "").Inc()
	p.o.Log.Error("terminating malformed message", "subject", m.Subject(), "err", cause)
	if r, ok := malformedRejection(m, cause); ok {
		if err := p.retryDB(shutdown, func() error { return p.o.Store.RecordRejections(work, []store.Rejection{r}) }); err != nil {
			p.o.Log.Warn("malformed message not recorded; leaving it for a redelivery", "subject", m.Subject(), "err", err)
			_ = m.Nak()
			return
		}
	}
	_ = m.TermWithReason("malformed envelope")
}

// malformedRejection is the record of m, refused by decode for cause: the
// identity headers as sent ("" where absent or not a key). ok is false for
// a message without stream metadata, which has no sequence to record.
func malformedRejection(m jetstream.Msg, cause error) (store.Rejection, bool) {
	meta, err := m.Metadata()
	if err != nil {
		return store.Rejection{}, false
	}
	h := m.Headers()
	r := store.Rejection{
		Tenant: h.Get(envelope.HeaderTenant), EventType: h.Get(envelope.HeaderEventType),
		PayloadSHA256: h.Get(envelope.HeaderPayloadSHA256), StreamSeq: int64(meta.Sequence.Stream), Subject: m.Subject(),
		MsgID: h.Get(envelope.HeaderMsgID), Reason: store.RejectMalformed, Detail: cause.Error(), ReceivedAt: &meta.Timestamp,
	}
	if k, ok := envelope.ParseKey(h.Get(envelope.HeaderKey)); ok {
		r.Integration, r.Account, r.EventID = k.Integration, k.Account, k.EventID
	}
	if id := h.Get(envelope.HeaderReplayID); id != "" {
		r.ReplayID = &id
	}
	if mode := h.Get(envelope.HeaderReplayMode); mode != "" {
		r.ReplayMode = &mode
	}
	return r, true
}

// replayIDLog is a log line's replay id: the envelope's Intake-Replay-Id
// when it has the replayer's form (a UUID), else only its length — the
// header is whatever the publisher wrote, unbounded.
func replayIDLog(id string) slog.Attr {
	if id == "" || validReplayID(id) {
		return slog.String("replay_id", id)
	}
	return slog.Int("replay_id_len", len(id))
}
