package processor

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

// outcome is what the inbox decided for one message.
type outcome int

const (
	outcomeNew         outcome = iota + 1 // applied for the first time
	outcomeDuplicate                      // same payload again as another stream message; counted
	outcomeRedelivered                    // the same stream message again (lost ack); nothing
	outcomeConflict                       // same key, other payload; recorded
	outcomeStale                          // older object version; recorded, not applied
	outcomeReplayed                       // exact replay of a settled event; nothing
	outcomeRetried                        // exact replay of a failed/quarantined event; applied
	outcomeReexecuted                     // explicit re-execution; applied again
)

func (o outcome) String() string {
	switch o {
	case outcomeNew:
		return "new"
	case outcomeDuplicate:
		return "duplicate"
	case outcomeRedelivered:
		return "redelivered"
	case outcomeConflict:
		return "conflict"
	case outcomeStale:
		return "stale"
	case outcomeReplayed:
		return "replayed"
	case outcomeRetried:
		return "retried"
	case outcomeReexecuted:
		return "reexecuted"
	}
	return "unknown"
}

// Execution modes (intake.executions.mode, Event.Mode).
const (
	ModeOriginal  = "original"
	ModeRetry     = "retry"
	ModeReexecute = "reexecute"
)

// apply is the batch's one transaction: claim every key in one statement,
// classify, guard object versions, run the handler for what applies, write
// executions, outbox, conflicts and counters, commit. It returns the outbox
// rows it committed (ids set), for the processor to publish. On a handler
// error it returns the index in b of the message whose handler failed.
func (p *Processor) apply(ctx context.Context, b []*item) ([]outcome, []store.OutboxRow, int, error) {
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

	outcomes := make([]outcome, len(b))
	culprit := -1
	var outbox []store.OutboxRow
	err := pgx.BeginFunc(ctx, p.o.Store.Pool(), func(tx pgx.Tx) error {
		claims := make([]store.BatchClaim, len(order))
		for j, i := range order {
			ev := b[i].ev
			claims[j] = store.BatchClaim{Claim: claimOf(ev), ObjectID: ev.ObjectID, ObjectVersion: ev.ObjectVersion}
		}
		inserted, existing, err := store.ClaimBatch(ctx, tx, claims)
		if err != nil {
			return err
		}

		var w store.BatchWrites
		var run []int
		for j, i := range order {
			ev := b[i].ev
			if inserted[j] {
				outcomes[i], ev.Mode = outcomeNew, ModeOriginal
				if ev.ReplayMode == envelope.ReplayReexecute {
					ev.Mode = ModeReexecute
				}
				run = append(run, i)
				continue
			}
			row, ok := existing[ev.Key]
			if !ok {
				return fmt.Errorf("processor: inbox row of %s neither inserted nor found", ev.Key)
			}
			switch {
			case row.PayloadSHA256 != ev.PayloadSHA256:
				outcomes[i] = outcomeConflict
				w.Conflicts = append(w.Conflicts, store.ConflictRow{Claim: claimOf(ev), Original: row})
			case ev.ReplayMode == envelope.ReplayReexecute:
				outcomes[i], ev.Mode = outcomeReexecuted, ModeReexecute
				run = append(run, i)
			case ev.ReplayMode == envelope.ReplayExact &&
				(row.Status == store.StatusFailed || row.Status == store.StatusQuarantined):
				outcomes[i], ev.Mode = outcomeRetried, ModeRetry
				run = append(run, i)
			case ev.ReplayMode == envelope.ReplayExact:
				outcomes[i] = outcomeReplayed
			case row.StreamSeq == ev.StreamSeq:
				outcomes[i] = outcomeRedelivered
			default:
				// Counted (delivery_count, last_received_at) through its
				// delivery-history row, below.
				outcomes[i] = outcomeDuplicate
			}
		}

		// Every accepted delivery enters the history from its stream message.
		// Redeliveries and replays are not deliveries; a conflicting payload
		// is recorded in conflicts and leaves the original row untouched.
		for i, it := range b {
			if it.ev.ReplayMode != "" {
				continue
			}
			switch outcomes[i] {
			case outcomeNew:
				w.FirstDeliveries = append(w.FirstDeliveries, acceptedDelivery(it.ev))
			case outcomeDuplicate:
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
			// A re-execution is asked for explicitly: it does not move the
			// object's version and is not refused as stale.
			if ev.ObjectID != "" && ev.Mode != ModeReexecute {
				ok, err := store.GuardVersion(ctx, tx, ev.Key, ev.ObjectID, ev.ObjectVersion)
				if err != nil {
					return err
				}
				if !ok {
					outcomes[i] = outcomeStale
					w.Stale = append(w.Stale, ev.Key)
					continue
				}
			}
			ev.ExecutionID = store.NewID()
			ev.queue = &w.Queued
			msgs, err := p.o.Handler.Handle(ctx, tx, ev)
			if err != nil {
				culprit = i
				return &handlerError{err: err}
			}
			if ev.Mode == ModeRetry {
				w.Retried = append(w.Retried, ev.Key)
			}
			w.Executions = append(w.Executions, store.Execution{
				ID: ev.ExecutionID, Key: ev.Key, Mode: ev.Mode, ReplayID: ev.ReplayID, StreamSeq: ev.StreamSeq,
			})
			for _, m := range msgs {
				h := IdentityHeader(ev)
				for k, v := range m.Header {
					h[k] = v
				}
				h.Set(envelope.HeaderExecutionID, ev.ExecutionID)
				w.Outbox = append(w.Outbox, store.OutboxRow{Key: ev.Key, Subject: m.Subject, Headers: h, Payload: m.Data})
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
