package processor

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
)

// apply is the batch's one transaction, in the steps the package doc tells
// (batchTx.run): screen the envelopes (what fails is recorded, not
// decided), claim every other key in one statement, decide each message
// (inbox.Decide), record the deliveries, run the handler for what applies
// behind the object-version guard, write executions, outbox, conflicts and
// counters, commit. It sets each item's outcome and returns the outbox rows
// it committed (ids set), for the processor to publish. On a handler error
// it returns the index in b of the message whose handler failed.
func (p *Processor) apply(ctx context.Context, b []*item) ([]store.OutboxRow, int, error) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Config.AckWait)
	defer cancel()
	start := time.Now()
	defer func() { p.o.Metrics.TxLatency.Observe(time.Since(start).Seconds()) }()

	p.verifyEnvelopes(b)
	t := newBatchTx(p, b)
	if err := pgx.BeginFunc(ctx, p.o.Store.Pool(), func(tx pgx.Tx) error { return t.run(ctx, tx) }); err != nil {
		return nil, t.culprit, err
	}
	return t.w.Outbox, t.culprit, nil
}

// batchTx is a batch's transaction in progress: what each step learns and
// the next one reads. What it learns of one message (outcome, executed,
// settles) is noted on the item, which exists anyway: no slice per note.
type batchTx struct {
	p *Processor
	b []*item
	// order is b's indexes in key order, copies of one key by stream
	// sequence; checkEnvelopes drops the refused messages from it.
	order []int
	// inserted says, by position in order, whether the claim inserted the
	// message's row; existing holds the rows it found, by key.
	inserted []bool
	existing map[envelope.Key]inbox.Row
	// runs are the indexes in b of the messages whose handler runs.
	runs []int
	// culprit is the index in b of the message whose handler failed, or -1.
	culprit int
	w       store.BatchWrites
}

// newBatchTx starts b's transaction. It works in key order, copies of one
// key by stream sequence: the lower sequence is the copy that claims the
// row (ClaimBatch's INSERT orders the same way, which is what makes two
// processors lock in one order).
func newBatchTx(p *Processor, b []*item) *batchTx {
	// order and runs share one allocation: a message runs at most once.
	idx := make([]int, 2*len(b))
	order, runs := idx[:len(b):len(b)], idx[len(b):len(b)]
	for i, it := range b {
		order[i] = i
		// A retry of the transaction (commitWithRetry) decides again.
		it.outcome, it.executed, it.settles = 0, false, false
	}
	slices.SortFunc(order, func(x, y int) int {
		a, c := b[x].ev, b[y].ev
		return cmp.Or(cmp.Compare(a.Key.Integration, c.Key.Integration), cmp.Compare(a.Key.Account, c.Key.Account),
			cmp.Compare(a.Key.EventID, c.Key.EventID), cmp.Compare(a.StreamSeq, c.StreamSeq))
	})
	return &batchTx{p: p, b: b, order: order, runs: runs, culprit: -1}
}

// run is the transaction's body, step by step.
func (t *batchTx) run(ctx context.Context, tx pgx.Tx) error {
	if err := t.checkEnvelopes(ctx, tx); err != nil {
		return err
	}
	if err := t.claim(ctx, tx); err != nil {
		return err
	}
	if err := t.findExecutedCopies(ctx, tx); err != nil {
		return err
	}
	if err := t.decide(); err != nil {
		return err
	}
	t.recordDeliveries()
	if err := t.runHandlers(ctx, tx); err != nil {
		return err
	}
	return t.w.Flush(ctx, tx)
}

// checkEnvelopes records what fails the envelope checks (screen), or
// carries a body already accepted under another id (guardBodies,
// replay_guard), and takes it out of order: no claim, no decision, no
// history.
func (t *batchTx) checkEnvelopes(ctx context.Context, tx pgx.Tx) error {
	if err := t.p.screen(ctx, tx, t.b); err != nil {
		return err
	}
	if err := t.p.guardBodies(ctx, tx, t.b); err != nil {
		return err
	}
	t.order = slices.DeleteFunc(t.order, func(i int) bool { return t.b[i].reject != nil })
	for _, it := range t.b {
		if it.reject != nil {
			t.w.Rejections = append(t.w.Rejections, *it.reject)
		}
	}
	return nil
}

// claim claims every key's inbox row in one statement (store.ClaimBatch).
func (t *batchTx) claim(ctx context.Context, tx pgx.Tx) error {
	if len(t.order) == 0 {
		return nil
	}
	claims := make([]store.BatchClaim, len(t.order))
	for j, i := range t.order {
		ev := t.b[i].ev
		claims[j] = store.BatchClaim{Claim: ev.claim(), ObjectID: ev.ObjectID, ObjectVersion: ev.ObjectVersion}
	}
	var err error
	t.inserted, t.existing, err = store.ClaimBatch(ctx, tx, claims)
	return err
}

// findExecutedCopies asks, for the replay copies of events that have a
// row, whether this very message ran already (committed, then its ack was
// lost). Replays are rare, so the query runs only for a batch that has some.
func (t *batchTx) findExecutedCopies(ctx context.Context, tx pgx.Tx) error {
	var copies []store.ExecutedCopy
	var copyOf []int
	for j, i := range t.order {
		if ev := t.b[i].ev; ev.ReplayMode != inbox.ReplayNone && !t.inserted[j] {
			copies = append(copies, store.ExecutedCopy{Key: ev.Key, StreamSeq: ev.StreamSeq, ReplayID: ev.ReplayID})
			copyOf = append(copyOf, i)
		}
	}
	if len(copies) == 0 {
		return nil
	}
	done, err := store.ExecutedCopies(ctx, tx, copies)
	if err != nil {
		return err
	}
	for c, i := range copyOf {
		t.b[i].executed = done[c]
	}
	return nil
}

// decide takes each claimed message's fate from its row (inbox.Decide):
// its outcome and execution mode, whether its handler runs, and a
// conflict's record.
func (t *batchTx) decide() error {
	for j, i := range t.order {
		it := t.b[i]
		ev := it.ev
		row, found := t.existing[ev.Key]
		if !t.inserted[j] && !found {
			return fmt.Errorf("processor: inbox row of %s neither inserted nor found", ev.Key)
		}
		d := inbox.Decide(row, !t.inserted[j], inbox.Message{PayloadSHA256: ev.PayloadSHA256,
			StreamSeq: ev.StreamSeq, ReplayMode: ev.ReplayMode, Executed: it.executed})
		it.outcome, it.settles, ev.Mode = d.Outcome, d.Settles, d.Mode
		it.decided(d.Outcome)
		if d.Run {
			t.runs = append(t.runs, i)
		}
		if d.Settles {
			// The next copy of this key in the batch (two replays of a
			// failed event) sees the row as this run leaves it:
			// processed, so an exact copy deduplicates.
			row.Status = inbox.StatusProcessed
			t.existing[ev.Key] = row
		}
		// A duplicate is counted (delivery_count, last_received_at)
		// through its delivery-history row (recordDeliveries); a conflict
		// is recorded.
		if d.Outcome == inbox.Conflict {
			t.w.Conflicts = append(t.w.Conflicts, store.ConflictRow{Claim: ev.claim(), Original: row})
		}
	}
	return nil
}

// recordDeliveries enters every accepted delivery in the history from its
// stream message. Redeliveries and replays are not deliveries; a
// conflicting payload is recorded in conflicts and leaves the original row
// untouched.
func (t *batchTx) recordDeliveries() {
	for _, it := range t.b {
		if it.ev.ReplayMode != inbox.ReplayNone || it.reject != nil {
			continue
		}
		switch it.outcome {
		case inbox.New:
			t.w.FirstDeliveries = append(t.w.FirstDeliveries, it.ev.acceptedDelivery())
		case inbox.Duplicate:
			t.w.Deliveries = append(t.w.Deliveries, it.ev.acceptedDelivery())
		}
	}
}

// runHandlers runs the handler of every message that applies, each
// object's events in version order, after the second step of the decision:
// the object-version guard, which makes an older version stale.
func (t *batchTx) runHandlers(ctx context.Context, tx pgx.Tx) error {
	slices.SortStableFunc(t.runs, func(x, y int) int {
		a, c := t.b[x].ev, t.b[y].ev
		return cmp.Or(cmp.Compare(a.ObjectID, c.ObjectID), cmp.Compare(a.ObjectVersion, c.ObjectVersion),
			cmp.Compare(a.StreamSeq, c.StreamSeq))
	})
	for _, i := range t.runs {
		it := t.b[i]
		ev := it.ev
		if ev.ObjectID != "" && ev.Mode.Guarded() {
			ok, err := store.GuardVersion(ctx, tx, ev.Key, ev.ObjectID, ev.ObjectVersion)
			if err != nil {
				return err
			}
			if !ok {
				it.outcome = inbox.Stale
				t.w.Stale = append(t.w.Stale, ev.Key)
				continue
			}
		}
		if err := t.runHandler(ctx, tx, i); err != nil {
			return err
		}
	}
	return nil
}

// runHandler runs message i's handler in tx and records its execution and
// its outbox rows. A handler error ends the transaction, i its culprit.
func (t *batchTx) runHandler(ctx context.Context, tx pgx.Tx, i int) error {
	it := t.b[i]
	ev := it.ev
	ev.ExecutionID = store.NewID()
	ev.queue = &t.w.Queued
	ev.handler = ""
	msgs, err := t.p.o.Handler.Handle(it.handlerCtx(ctx), tx, ev)
	if err != nil {
		t.culprit = i
		return &handlerError{err: err}
	}
	if it.settles {
		t.w.Settled = append(t.w.Settled, ev.Key)
	}
	t.w.Executions = append(t.w.Executions, store.Execution{
		ID: ev.ExecutionID, Key: ev.Key, Mode: ev.Mode, ReplayID: ev.ReplayID, StreamSeq: ev.StreamSeq,
	})
	for pos, m := range msgs {
		t.w.Outbox = append(t.w.Outbox, it.outboxRow(pos, m, t.p.o.OutboxPayloadCopy))
	}
	return nil
}

// outboxRow is m, the handler's output number pos, as an outbox row: the
// event's identity headers under m's own, its execution and trace.
func (it *item) outboxRow(pos int, m Message, copyPayload bool) store.OutboxRow {
	ev := it.ev
	// Sized for what it will hold (the identity, m's own headers, the
	// execution and the trace), so it never grows.
	h := make(nats.Header, identityHeaders+len(m.Header)+2)
	putIdentity(h, ev)
	for k, v := range m.Header {
		h[k] = v
	}
	h[envelope.HeaderExecutionID] = []string{ev.ExecutionID} // canonical already: Set would only check
	it.injectOutbox(h)
	row := store.OutboxRow{Key: ev.Key, Subject: m.Subject, Headers: h, Payload: m.Data,
		MsgID: envelope.OutboxMsgID(ev.Key, ev.Mode, ev.ReplayID, pos)}
	if sha := h[envelope.HeaderPayloadSHA256]; !copyPayload && ev.StreamSeq != 0 && bytes.Equal(m.Data, ev.Body) &&
		len(sha) == 1 && sha[0] == ev.PayloadSHA256 {
		// INTAKE_IN holds this body at the event's sequence: the row keeps
		// the sequence, not a copy (migration 00023), nor the hash that
		// message carries. (A handler that set another hash header keeps
		// the copy, and its header.)
		row.PayloadSeq = ev.StreamSeq
	}
	return row
}

type handlerError struct{ err error }

func (e *handlerError) Error() string { return "handler: " + e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }
