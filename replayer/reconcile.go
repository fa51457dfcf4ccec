package replayer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// ReconcileRequest is a range of INTAKE_IN to compare with the inbox:
// sequences FromSeq..ToSeq (0: open) and/or message times Since ≤ t < Until.
type ReconcileRequest struct {
	FromSeq, ToSeq uint64
	Since, Until   time.Time
	Integration    string
	// MaxSpan lowers Options.ReconcileMaxSpan for this request (the API
	// sets Options.ReconcileViewerMaxSpan for a viewer). 0: no lower.
	MaxSpan int
	// Viewer marks a viewer's reconcile (the API sets it): viewers'
	// reconciles hold at most one of Options.MaxReconciles slots.
	Viewer bool
}

// ErrBusy: Options.MaxReconciles reconciles are running already (or, for a
// viewer's, a viewer's reconcile is); try again later (the API answers 429
// with Retry-After).
var ErrBusy = errors.New("replayer: too many reconciles running")

// errViewerBusy is ErrBusy for a viewer's reconcile while another viewer's runs.
var errViewerBusy = fmt.Errorf("%w: a viewer's reconcile is running, and viewers run one at a time", ErrBusy)

// ErrSpanTooLarge: the range covers more stream messages than one reconcile
// may check; the error says the bound. Split the range.
var ErrSpanTooLarge = errors.New("replayer: reconcile range too large")

// ReconcileResult is a reconcile's answer, as GET /api/v1/reconcile sends
// it (apiclient.ReconcileResult), and what the re-drive needs besides to
// act on it.
type ReconcileResult struct {
	apiclient.ReconcileResult

	lostConflicts []store.ConflictRow
	// missingSeq is each Missing key's message the fix replays (the first
	// in the range); afterFix are the missing keys' other settled
	// messages, to check against the row the fix will write (the
	// re-drive's deferred conflict check).
	missingSeq map[envelope.Key]uint64
	afterFix   []store.ConflictRow
}

const maxMissingListed = 10_000

// Reconcile compares an INTAKE_IN range with the inbox and lists accepted
// messages without an inbox row. It runs in one of Options.MaxReconciles
// slots, or returns ErrBusy.
func (r *Replayer) Reconcile(ctx context.Context, req ReconcileRequest) (ReconcileResult, error) {
	span, err := r.reconcileSpan(req)
	if err != nil {
		return ReconcileResult{}, err
	}
	release, err := r.reconcileSlot(req.Viewer)
	if err != nil {
		return ReconcileResult{}, err
	}
	defer release()
	return r.runReconcile(ctx, req, span)
}

// reconcileSlot takes an API reconcile's slot, and for a viewer's the
// viewers' one, without waiting: ErrBusy when none is free.
func (r *Replayer) reconcileSlot(viewer bool) (release func(), err error) {
	if viewer {
		select {
		case r.viewerReconcile <- struct{}{}:
		default:
			return nil, errViewerBusy
		}
	}
	select {
	case r.reconciles <- struct{}{}:
	default:
		if viewer {
			<-r.viewerReconcile
		}
		return nil, ErrBusy
	}
	return func() {
		<-r.reconciles
		if viewer {
			<-r.viewerReconcile
		}
	}, nil
}

// runReconcile is Reconcile without a slot: the re-drive's (one pass at a time).
func (r *Replayer) runReconcile(ctx context.Context, req ReconcileRequest, span uint64) (ReconcileResult, error) {
	res := ReconcileResult{ReconcileResult: apiclient.ReconcileResult{Shard: r.o.Shard, Missing: []apiclient.MissingEvent{}}}
	// The ack floor first: a message at or below it was settled before the
	// scan read the inbox, so no inbox row then means missing.
	ackFloor, err := r.ackFloor(ctx)
	if err != nil {
		return res, err
	}
	res.AckFloor = ackFloor
	if err := r.checkSeqSpan(ctx, req, span); err != nil {
		return res, err
	}
	var msgs []inMsg
	if msgs, res.LastSeq, err = r.scanDeliveries(ctx, req, span); err != nil {
		return res, err
	}
	res.Checked = len(msgs)
	keys := make([]envelope.Key, len(msgs))
	for i, m := range msgs {
		keys[i] = m.key
	}
	pctx, cancel := pgBound(ctx)
	rows, err := r.o.Store.LookupInbox(pctx, keys)
	cancel()
	if err != nil {
		return res, err
	}
	noRow, conflicting := withoutRecord(msgs, rows, ackFloor)
	pctx, cancel = pgBound(ctx)
	rejected, err := r.o.Store.RejectedSeqs(pctx, append(noRow, seqsOf(conflicting)...))
	cancel()
	if err != nil {
		return res, err
	}
	if res.lostConflicts, err = r.lostConflicts(ctx, conflicting, rejected); err != nil {
		return res, err
	}
	for _, c := range res.lostConflicts {
		res.LostConflicts = append(res.LostConflicts, apiclient.MissingEvent{Key: c.Key.String(), StreamSeq: c.StreamSeq})
	}
	res.listMissing(msgs, rows, rejected, ackFloor)
	return res, nil
}

// reconcileSpan checks req and returns the most stream messages it may
// check: Options.ReconcileMaxSpan, lowered by req.MaxSpan.
func (r *Replayer) reconcileSpan(req ReconcileRequest) (uint64, error) {
	if req.ToSeq != 0 && req.ToSeq < req.FromSeq {
		return 0, badRequest("to_seq: must not be below from_seq")
	}
	if !req.Since.IsZero() && !req.Until.IsZero() && !req.Until.After(req.Since) {
		return 0, badRequest("until: must be after since")
	}
	if err := r.checkMine("integration", req.Integration); err != nil {
		return 0, err
	}
	span := uint64(r.o.ReconcileMaxSpan)
	if req.MaxSpan > 0 {
		span = min(span, uint64(req.MaxSpan))
	}
	if req.FromSeq != 0 && req.ToSeq != 0 && req.ToSeq-req.FromSeq >= span {
		return 0, spanTooLarge(span)
	}
	return span, nil
}

func spanTooLarge(span uint64) error {
	return fmt.Errorf("%w: it covers more than %d stream messages, the most one reconcile checks: narrow or split it", ErrSpanTooLarge, span)
}

// checkSeqSpan bounds a range of sequences only by the stream's first and
// last sequence before the scan; a time range is bounded while it is
// scanned.
func (r *Replayer) checkSeqSpan(ctx context.Context, req ReconcileRequest, span uint64) error {
	if !req.Since.IsZero() || !req.Until.IsZero() {
		return nil
	}
	first, last, err := streamBounds(ctx, r.o.JS, envelope.StreamIn)
	if err != nil {
		return err
	}
	from, to := max(req.FromSeq, first), last
	if req.ToSeq != 0 {
		to = min(req.ToSeq, last)
	}
	if to >= from && to-from >= span {
		return spanTooLarge(span)
	}
	return nil
}

// inMsg is one ingress message of INTAKE_IN a reconcile checks.
type inMsg struct {
	key     envelope.Key
	seq     uint64
	subject string
	h       nats.Header
	// malformed: the envelope does not parse, so the processor refuses it
	// (terminated, recorded as store.RejectMalformed): counted rejected,
	// never replayed — a copy would come with its headers repaired.
	malformed bool
}

// scanDeliveries reads req's range of INTAKE_IN: the ingress messages (not
// replay copies) of this replayer's integrations, and the stream's last
// sequence. A message is judged by the processor's own parse
// (envelope.ParseDelivery): one that fails it is kept as malformed. More than span messages in the range is ErrSpanTooLarge.
func (r *Replayer) scanDeliveries(ctx context.Context, req ReconcileRequest, span uint64) ([]inMsg, uint64, error) {
	rg := scanRange{From: req.FromSeq, To: req.ToSeq, Since: req.Since, Until: req.Until,
		Subjects: r.inSubjects(req.Integration)}
	var msgs []inMsg
	var scannedMsgs uint64
	last, err := scanStream(ctx, r.o.JS, envelope.StreamIn, rg, func(m scanned) error {
		if scannedMsgs++; scannedMsgs > span {
			return spanTooLarge(span)
		}
		d, err := envelope.ParseDelivery(m.Header, nil)
		if err == nil && d.ReplayID != "" {
			return nil // a replay copy is never itself missing
		}
		k, ok := d.Key, err == nil
		if !ok {
			k, ok = envelope.ParseKey(m.Header.Get(envelope.HeaderKey))
		}
		if !ok || (req.Integration != "" && k.Integration != req.Integration) || !r.mine(k.Integration) {
			return nil
		}
		if len(msgs) >= r.o.MaxMatched {
			return ErrTooMany
		}
		msgs = append(msgs, inMsg{key: k, seq: m.Seq, subject: m.Subject, h: m.Header, malformed: err != nil})
		return nil
	})
	return msgs, last, err
}

// withoutRecord picks the messages the inbox may hold no record of: those
// without an inbox row of their own (missing or pending, unless refused on
// purpose), and those settled with a payload other than their key's row,
// which must have a conflict record.
func withoutRecord(msgs []inMsg, rows map[envelope.Key]store.InboxState, ackFloor uint64) (noRow []uint64, conflicting []store.ConflictRow) {
	for _, m := range msgs {
		row, ok := rows[m.key]
		switch {
		case m.malformed:
		case !ok:
			noRow = append(noRow, m.seq)
		case m.seq <= ackFloor && m.seq != row.StreamSeq && m.h.Get(envelope.HeaderPayloadSHA256) != row.PayloadSHA256 &&
			// The checks the processor made before recording a conflict:
			// a message that fails them was rejected instead.
			m.h.Get(envelope.HeaderTenant) == row.Tenant &&
			envelope.IsSubjectIn(m.subject, m.key.Integration):
			conflicting = append(conflicting, conflictOf(m.key, m.seq, m.h, row))
		}
	}
	return noRow, conflicting
}

// listMissing sorts the keys without an inbox row into rejected, pending
// (past the ack floor) and missing, writes the replay that fixes the
// missing ones, and keeps their other settled messages for after the fix.
func (res *ReconcileResult) listMissing(msgs []inMsg, rows map[envelope.Key]store.InboxState, rejected map[uint64]bool, ackFloor uint64) {
	listed := map[envelope.Key]bool{}
	res.missingSeq = map[envelope.Key]uint64{}
	var from, to uint64
	var fixKeys []string
	for _, m := range msgs {
		if m.malformed {
			res.Rejected++
			continue
		}
		if _, ok := rows[m.key]; ok || listed[m.key] {
			continue
		}
		if rejected[m.seq] {
			res.Rejected++
			continue
		}
		listed[m.key] = true
		if m.seq > ackFloor {
			res.Pending++
			continue
		}
		if len(res.Missing) >= maxMissingListed {
			res.Truncated = true
			continue
		}
		res.Missing = append(res.Missing, apiclient.MissingEvent{Key: m.key.String(), StreamSeq: m.seq})
		res.missingSeq[m.key] = m.seq
		fixKeys = append(fixKeys, m.key.String())
		if from == 0 || m.seq < from {
			from = m.seq
		}
		to = max(to, m.seq)
	}
	// A missing key's other settled messages (a second payload under the
	// same id, whose conflict record went with the lost commit) can be
	// judged only once the fix has given the key its row again.
	for _, m := range msgs {
		if first, ok := res.missingSeq[m.key]; ok && !m.malformed && m.seq != first && m.seq <= ackFloor && !rejected[m.seq] &&
			envelope.IsSubjectIn(m.subject, m.key.Integration) {
			res.afterFix = append(res.afterFix, conflictOf(m.key, m.seq, m.h, store.InboxState{}))
		}
	}
	if len(fixKeys) > 0 {
		res.Fix = &apiclient.ReplayRequest{
			Selector: apiclient.Selector{Keys: fixKeys, StreamSeq: &apiclient.SeqRange{From: from, To: to}},
			Mode:     inbox.ReplayExact,
			Reason:   fmt.Sprintf("reconcile: %d accepted events without an inbox row", len(fixKeys)),
		}
	}
}

// conflictOf is the conflict record of message seq (headers h) against its
// key's inbox row.
func conflictOf(k envelope.Key, seq uint64, h nats.Header, row store.InboxState) store.ConflictRow {
	c := store.ConflictRow{
		Claim: store.Claim{Key: k, Tenant: h.Get(envelope.HeaderTenant), EventType: h.Get(envelope.HeaderEventType),
			PayloadSHA256: h.Get(envelope.HeaderPayloadSHA256), StreamSeq: seq},
		Original: inbox.Row{PayloadSHA256: row.PayloadSHA256, StreamSeq: row.StreamSeq, Status: row.Status},
	}
	if t, err := time.Parse(time.RFC3339Nano, h.Get(envelope.HeaderReceivedAt)); err == nil {
		c.ReceivedAt = t
	}
	return c
}

func seqsOf(cs []store.ConflictRow) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = c.StreamSeq
	}
	return out
}

// lostConflicts keeps the conflicting messages whose conflict record is
// gone: neither recorded nor refused on purpose (a rejection).
func (r *Replayer) lostConflicts(ctx context.Context, cs []store.ConflictRow, rejected map[uint64]bool) ([]store.ConflictRow, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	claims := make([]store.Claim, len(cs))
	for i, c := range cs {
		claims[i] = c.Claim
	}
	pctx, cancel := pgBound(ctx)
	recorded, err := r.o.Store.ConflictSeqs(pctx, claims)
	cancel()
	if err != nil {
		return nil, err
	}
	var lost []store.ConflictRow
	for _, c := range cs {
		if !recorded[c.StreamSeq] && !rejected[c.StreamSeq] {
			lost = append(lost, c)
		}
	}
	return lost, nil
}

// streamBounds is the stream's first and last sequence now.
func streamBounds(ctx context.Context, js jetstream.JetStream, name string) (first, last uint64, err error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0, 0, fmt.Errorf("stream %s: %w", name, err)
	}
	st := s.CachedInfo().State
	return st.FirstSeq, st.LastSeq, nil
}

// ackFloor is the ack floor of the processors' durable (the shard's for a
// shard's replayer); 0 when it does not exist (nothing was ever processed:
// every message is pending). A shard's durable sees its integrations'
// messages only: every one of them up to the floor is settled.
func (r *Replayer) ackFloor(ctx context.Context) (uint64, error) {
	name := r.durable()
	c, err := r.o.JS.Consumer(ctx, envelope.StreamIn, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("consumer %s: %w", name, err)
	}
	return c.CachedInfo().AckFloor.Stream, nil
}
