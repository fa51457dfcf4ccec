package processor

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
)

// apply is the batch's one transaction: screen the envelopes (screen; what
// fails is recorded, not decided), claim every other key in one statement,
// decide each message (inbox.Decide), guard object versions, run the
// handler for what applies, write executions, outbox, conflicts and
// counters, commit. It returns the outbox rows it committed (ids set), for
// the processor to publish. On a handler error it returns the index in b of
// the message whose handler failed.
func (p *Processor) apply(ctx context.Context, b []*item) ([]inbox.Outcome, []store.OutboxRow, int, error) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Config.AckWait)
	defer cancel()
	start := time.Now()
	defer func() { p.o.Metrics.TxLatency.Observe(time.Since(start).Seconds()) }()

	// Work in key order, copies of one key by stream sequence: the lower
	// sequence is the copy that claims the row (ClaimBatch's INSERT orders
	// the same way, which is what makes two processors lock in one order).
	order := make([]int, len(b))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int {
		a, c := b[x].ev, b[y].ev
		return cmp.Or(cmp.Compare(a.Key.Integration, c.Key.Integration), cmp.Compare(a.Key.Account, c.Key.Account),
			cmp.Compare(a.Key.EventID, c.Key.EventID), cmp.Compare(a.StreamSeq, c.StreamSeq))
	})

	outcomes := make([]inbox.Outcome, len(b))
	settles := make([]bool, len(b))
	culprit := -1
	var outbox []store.OutboxRow
	err := pgx.BeginFunc(ctx, p.o.Store.Pool(), func(tx pgx.Tx) error {
		// What fails the envelope checks is recorded and goes no further:
		// no claim, no decision, no history.
		if err := p.screen(ctx, tx, b); err != nil {
			return err
		}
		// A body already accepted under another id (replay_guard) is
		// refused the same way, before its claim.
		if err := p.guardBodies(ctx, tx, b); err != nil {
			return err
		}
		var w store.BatchWrites
		order := slices.DeleteFunc(slices.Clone(order), func(i int) bool { return b[i].reject != nil })
		for _, it := range b {
			if it.reject != nil {
				w.Rejections = append(w.Rejections, *it.reject)
			}
		}

		claims := make([]store.BatchClaim, len(order))
		for j, i := range order {
			ev := b[i].ev
			claims[j] = store.BatchClaim{Claim: claimOf(ev), ObjectID: ev.ObjectID, ObjectVersion: ev.ObjectVersion}
		}
		var (
			inserted []bool
			existing map[envelope.Key]store.Row
		)
		if len(claims) > 0 {
			var err error
			if inserted, existing, err = store.ClaimBatch(ctx, tx, claims); err != nil {
				return err
			}
		}
		// Replay copies of events that have a row: did this very message run
		// already (committed, then its ack was lost)? Replays are rare, so
		// the query runs only for a batch that has some.
		var copies []store.ExecutedCopy
		var copyOf []int
		for j, i := range order {
			if ev := b[i].ev; ev.ReplayMode != inbox.ReplayNone && !inserted[j] {
				copies = append(copies, store.ExecutedCopy{Key: ev.Key, StreamSeq: ev.StreamSeq, ReplayID: ev.ReplayID})
				copyOf = append(copyOf, i)
			}
		}
		executed := make([]bool, len(b))
		if len(copies) > 0 {
			done, err := store.ExecutedCopies(ctx, tx, copies)
			if err != nil {
				return err
			}
			for c, i := range copyOf {
				executed[i] = done[c]
			}
		}

		var run []int
		for j, i := range order {
			ev := b[i].ev
			row, found := existing[ev.Key]
			if !inserted[j] && !found {
				return fmt.Errorf("processor: inbox row of %s neither inserted nor found", ev.Key)
			}
			d := inbox.Decide(row, !inserted[j], inbox.Message{PayloadSHA256: ev.PayloadSHA256,
				StreamSeq: ev.StreamSeq, ReplayMode: ev.ReplayMode, Executed: executed[i]})
			outcomes[i], ev.Mode = d.Outcome, d.Mode
			b[i].decided(d.Outcome)
			settles[i] = d.Settles
			if d.Run {
				run = append(run, i)
			}
			if d.Settles {
				// The next copy of this key in the batch (two replays of a
				// failed event) sees the row as this run leaves it:
				// processed, so an exact copy deduplicates.
				row.Status = inbox.StatusProcessed
				existing[ev.Key] = row
			}
			// A duplicate is counted (delivery_count, last_received_at)
			// through its delivery-history row, below; a conflict is recorded.
			if d.Outcome == inbox.Conflict {
				w.Conflicts = append(w.Conflicts, store.ConflictRow{Claim: claimOf(ev), Original: row})
			}
		}

		// Every accepted delivery enters the history from its stream message.
		// Redeliveries and replays are not deliveries; a conflicting payload
		// is recorded in conflicts and leaves the original row untouched.
		for i, it := range b {
			if it.ev.ReplayMode != "" || it.reject != nil {
				continue
			}
			switch outcomes[i] {
			case inbox.New:
				w.FirstDeliveries = append(w.FirstDeliveries, acceptedDelivery(it.ev))
			case inbox.Duplicate:
				w.Deliveries = append(w.Deliveries, acceptedDelivery(it.ev))
			}
		}

		// Within a batch, apply each object's events in version order.
		slices.SortStableFunc(run, func(x, y int) int {
			a, c := b[x].ev, b[y].ev
			return cmp.Or(cmp.Compare(a.ObjectID, c.ObjectID), cmp.Compare(a.ObjectVersion, c.ObjectVersion),
				cmp.Compare(a.StreamSeq, c.StreamSeq))
		})
		for _, i := range run {
			ev := b[i].ev
			// The second step of the decision: the object-version guard.
			if ev.ObjectID != "" && ev.Mode.Guarded() {
				ok, err := store.GuardVersion(ctx, tx, ev.Key, ev.ObjectID, ev.ObjectVersion)
				if err != nil {
					return err
				}
				if !ok {
					outcomes[i] = inbox.Stale
					w.Stale = append(w.Stale, ev.Key)
					continue
				}
			}
			ev.ExecutionID = store.NewID()
			ev.queue = &w.Queued
			msgs, err := p.o.Handler.Handle(b[i].handlerCtx(ctx), tx, ev)
			if err != nil {
				culprit = i
				return &handlerError{err: err}
			}
			if settles[i] {
				w.Settled = append(w.Settled, ev.Key)
			}
			w.Executions = append(w.Executions, store.Execution{
				ID: ev.ExecutionID, Key: ev.Key, Mode: ev.Mode, ReplayID: ev.ReplayID, StreamSeq: ev.StreamSeq,
			})
			for pos, m := range msgs {
				h := IdentityHeader(ev)
				for k, v := range m.Header {
					h[k] = v
				}
				h.Set(envelope.HeaderExecutionID, ev.ExecutionID)
				b[i].injectOutbox(h)
				w.Outbox = append(w.Outbox, store.OutboxRow{Key: ev.Key, Subject: m.Subject, Headers: h, Payload: m.Data,
					MsgID: envelope.OutboxMsgID(ev.Key, ev.Mode, ev.ReplayID, pos)})
			}
		}
		if err := w.Flush(ctx, tx); err != nil {
			return err
		}
		outbox = w.Outbox
		return nil
	})
	if err != nil {
		return outcomes, nil, culprit, err
	}
	return outcomes, outbox, culprit, nil
}

type handlerError struct{ err error }

func (e *handlerError) Error() string { return "handler: " + e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

func acceptedDelivery(ev *Event) store.Delivery {
	return store.Delivery{
		ReceiptID: envelope.StreamReceiptID(ev.StreamSeq), Key: ev.Key, ReceivedAt: ev.ReceivedAt,
		Instance: ev.Instance, StatusCode: 200, Answer: "accepted", RetryHints: ev.RetryHints,
	}
}
