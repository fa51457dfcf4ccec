package replayer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

// With asynchronous streaming replication, a commit the old primary
// acknowledged but never shipped is lost when the standby is promoted,
// while the processor has already acked its message in INTAKE_IN: the
// event was accepted, has no inbox row, and nobody will deliver it again.
// Reconcile finds such messages (acked, no inbox row, not rejected); a
// re-drive pass runs it and starts its Fix — an exact replay, which for a
// key without an inbox row is the event's first execution. Run passes every
// RedriveInterval over the range not checked yet, and over the last
// RedriveLookback at start and whenever the Postgres server behind the pool
// changes. Messages the processor has not acked (pending) or refused on
// purpose (rejected) are never re-driven. A shard's replayer re-drives its
// shard's: the ack floor of processor-{shard}, its integrations' messages.

// RedriveTrigger says why a re-drive pass ran.
type RedriveTrigger string

// Re-drive triggers.
const (
	// RedriveStart: the replayer started; the pass looks back
	// RedriveLookback.
	RedriveStart RedriveTrigger = "start"
	// RedriveScheduled: every RedriveInterval, from where the previous pass
	// stopped.
	RedriveScheduled RedriveTrigger = "scheduled"
	// RedriveFailover: another Postgres server answers (or the same one
	// restarted); the pass looks back RedriveLookback.
	RedriveFailover RedriveTrigger = "failover"
)

// RedriveRequester is the requested_by of the replays re-drive passes start.
const RedriveRequester = "redrive"

const (
	// redriveOverlap: a scheduled pass re-checks this many sequences below
	// where the previous one stopped — cheap insurance; a key a replay has
	// yet to publish is not replayed twice (store.QueuedForReplay).
	redriveOverlap = 1000
	// redriveMaxChunks bounds one pass to this many reconciles of at most
	// ReconcileMaxSpan messages; the rest waits for the next pass.
	redriveMaxChunks = 10
	// redriveKept is how many passes GET /api/v1/redrive shows.
	redriveKept = 20
)

// Redrive is the record of one re-drive pass (GET /api/v1/redrive).
type Redrive struct {
	Trigger RedriveTrigger `json:"trigger"`
	At      time.Time      `json:"at"`
	// FromSeq..ToSeq is the INTAKE_IN range checked; empty (0..0) when the
	// processor had acked nothing new.
	FromSeq uint64 `json:"from_seq"`
	ToSeq   uint64 `json:"to_seq"`
	// Checked counts ingress messages in the range; Missing those acked
	// without an inbox row; Redriven the events the pass replayed (Missing
	// minus keys a running replay is about to publish and messages gone
	// from the stream).
	Checked  int `json:"checked"`
	Missing  int `json:"missing"`
	Redriven int `json:"redriven"`
	// Truncated: more were missing than one reconcile lists; the next pass
	// goes on from ToSeq.
	Truncated bool `json:"truncated,omitempty"`
	// ConflictsRecorded counts conflict records the pass wrote again:
	// conflicting deliveries the processor acknowledged whose record is
	// gone (ReconcileResult.LostConflicts).
	ConflictsRecorded int      `json:"conflicts_recorded"`
	ReplayIDs         []string `json:"replay_ids"`
	Error             string   `json:"error,omitempty"`
}

// redriveState is a replayer's re-drive memory: in-process only; a new
// replayer starts with a lookback pass.
type redriveState struct {
	pass     sync.Mutex    // one pass at a time
	failover chan struct{} // a server change asks for a lookback pass

	mu     sync.Mutex
	cursor uint64 // highest sequence checked by a pass
	passes []Redrive
}

// RedrivePass runs one re-drive pass now: a scheduled pass checks from where
// the last stopped (less a small overlap) up to the processor's ack floor; a
// start or failover pass (or the first one) checks messages of the last
// RedriveLookback. Missing events are replayed (exact mode, requested by
// RedriveRequester). Run calls it; tests and operators may too.
func (r *Replayer) RedrivePass(ctx context.Context, trigger RedriveTrigger) (Redrive, error) {
	st := &r.redrive
	st.pass.Lock()
	defer st.pass.Unlock()
	rec := Redrive{Trigger: trigger, At: time.Now().UTC(), ReplayIDs: []string{}}
	err := r.redrivePass(ctx, &rec)
	if err != nil {
		rec.Error = err.Error()
	}
	r.metrics.redrivePasses.WithLabelValues(string(trigger)).Inc()
	st.mu.Lock()
	st.passes = append(st.passes, rec)
	if len(st.passes) > redriveKept {
		st.passes = append([]Redrive(nil), st.passes[len(st.passes)-redriveKept:]...)
	}
	st.mu.Unlock()
	switch {
	case err != nil && ctx.Err() == nil:
		r.o.Log.Error("re-drive pass failed", "trigger", trigger, "from_seq", rec.FromSeq, "to_seq", rec.ToSeq,
			"redriven", rec.Redriven, "replay_ids", rec.ReplayIDs, "err", err)
	case rec.Redriven > 0 || rec.ConflictsRecorded > 0:
		r.o.Log.Warn("re-drove events the processor acknowledged without an inbox row (a commit lost in a Postgres "+
			"failover?)", "trigger", trigger, "redriven", rec.Redriven, "missing", rec.Missing, "from_seq", rec.FromSeq,
			"to_seq", rec.ToSeq, "truncated", rec.Truncated, "replay_ids", rec.ReplayIDs, "conflicts_recorded", rec.ConflictsRecorded)
	}
	return rec, err
}

func (r *Replayer) redrivePass(ctx context.Context, rec *Redrive) error {
	ackFloor, err := r.ackFloor(ctx)
	if err != nil || ackFloor == 0 {
		return err
	}
	first, _, err := streamBounds(ctx, r.o.JS, envelope.StreamIn)
	if err != nil {
		return err
	}
	st := &r.redrive
	st.mu.Lock()
	cursor := st.cursor
	st.mu.Unlock()
	var from uint64
	if rec.Trigger == RedriveScheduled && cursor > 0 {
		from = cursor + 1 - min(cursor, redriveOverlap)
	} else if from, err = r.firstSeqSince(ctx, time.Now().Add(-r.o.RedriveLookback)); err != nil || from == 0 {
		return err // or nothing arrived in the lookback
	}
	from = max(from, first)
	if from > ackFloor {
		return nil
	}
	rec.FromSeq = from
	span := uint64(r.o.ReconcileMaxSpan)
	for lo, chunks := from, 0; lo <= ackFloor && chunks < redriveMaxChunks; chunks++ {
		hi := min(ackFloor, lo+span-1)
		res, err := r.reconcileWhenFree(ctx, ReconcileRequest{FromSeq: lo, ToSeq: hi})
		if err != nil {
			return err
		}
		rec.Checked += res.Checked
		rec.Missing += len(res.Missing)
		if len(res.lostConflicts) > 0 {
			n, err := r.o.Store.RecordConflicts(ctx, res.lostConflicts)
			rec.ConflictsRecorded += n
			r.metrics.redrivenConflicts.Add(float64(n))
			if err != nil {
				return err
			}
		}
		if res.Fix != nil {
			if err := r.redriveFix(ctx, rec, *res.Fix, lo, hi); err != nil {
				return err
			}
		}
		rec.ToSeq = hi
		if res.Truncated {
			// Go on after the last listed one next time, even if a
			// scheduled pass had gone further.
			rec.ToSeq, rec.Truncated = res.Missing[len(res.Missing)-1].StreamSeq, true
			st.mu.Lock()
			st.cursor = rec.ToSeq
			st.mu.Unlock()
			return nil
		}
		st.mu.Lock()
		st.cursor = max(st.cursor, hi)
		st.mu.Unlock()
		lo = hi + 1
	}
	return nil
}

// redriveFix starts fix for real, without the keys a running replay has yet
// to publish.
func (r *Replayer) redriveFix(ctx context.Context, rec *Redrive, fix ReplayRequest, lo, hi uint64) error {
	keys := parseKeys(fix.Selector.Keys)
	queued, err := r.o.Store.QueuedForReplay(ctx, keys)
	if err != nil {
		return err
	}
	fix.Selector.Keys = fix.Selector.Keys[:0]
	for _, k := range keys {
		if !queued[k] {
			fix.Selector.Keys = append(fix.Selector.Keys, k.String())
		}
	}
	if len(fix.Selector.Keys) == 0 {
		return nil
	}
	dryRun := false
	fix.DryRun = &dryRun
	fix.Reason = fmt.Sprintf("redrive (%s pass): %d events acknowledged without an inbox row in %s %d..%d",
		rec.Trigger, len(fix.Selector.Keys), envelope.StreamIn, lo, hi)
	rep, err := r.Replay(ctx, RedriveRequester, fix)
	if err != nil {
		return fmt.Errorf("redrive: start replay: %w", err)
	}
	n := int(rep.Matched - rep.Outcomes[Missing])
	rec.Redriven += n
	rec.ReplayIDs = append(rec.ReplayIDs, rep.ID)
	r.metrics.redriven.Add(float64(n))
	return nil
}

// reconcileWhenFree is Reconcile, waiting (up to a minute) for a slot while
// operators' reconciles hold them all.
func (r *Replayer) reconcileWhenFree(ctx context.Context, req ReconcileRequest) (ReconcileResult, error) {
	for attempt := 0; ; attempt++ {
		res, err := r.Reconcile(ctx, req)
		if !errors.Is(err, ErrBusy) || attempt == 60 {
			return res, err
		}
		if err := backoff.Sleep(ctx, time.Second); err != nil {
			return res, err
		}
	}
}

// firstSeqSince is the sequence of INTAKE_IN's first message (of this
// replayer's integrations) at or after t; 0 when there is none.
func (r *Replayer) firstSeqSince(ctx context.Context, t time.Time) (uint64, error) {
	var seq uint64
	_, err := scanStream(ctx, r.o.JS, envelope.StreamIn, scanRange{Since: t, Subjects: r.inSubjects("")}, func(m scanned) error {
		seq = m.Seq
		return errStopScan
	})
	return seq, err
}

// watchRedrive runs a start pass, then a scheduled pass every
// RedriveInterval and a failover pass after each server change, until ctx
// ends.
func (r *Replayer) watchRedrive(ctx context.Context) {
	tick := time.NewTicker(r.o.RedriveInterval)
	defer tick.Stop()
	trigger := RedriveStart
	for {
		_, _ = r.RedrivePass(ctx, trigger) // logged inside
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			trigger = RedriveScheduled
		case <-r.redrive.failover:
			trigger = RedriveFailover
		}
	}
}

// serverChanged is the server watcher's callback: count, log, and ask for
// a lookback pass.
func (r *Replayer) serverChanged(c store.ServerChange) {
	r.metrics.serverChanges.Inc()
	r.o.Log.Warn("another Postgres server answers (failover or restart): looking back for lost commits",
		"old", c.Old.String(), "new", c.New.String(), "redrive", r.o.RedriveInterval > 0)
	select {
	case r.redrive.failover <- struct{}{}:
	default:
	}
}

// RedriveStatus is GET /api/v1/redrive.
type RedriveStatus struct {
	Enabled  bool   `json:"enabled"`
	Interval string `json:"interval"`
	Lookback string `json:"lookback"`
	// Cursor is the highest INTAKE_IN sequence a pass has checked.
	Cursor uint64 `json:"cursor"`
	// Passes are the last passes of this replayer, newest first.
	Passes []Redrive `json:"passes"`
}

// RedriveStatus reports this replayer's re-drive settings and last passes.
func (r *Replayer) RedriveStatus() RedriveStatus {
	st := &r.redrive
	st.mu.Lock()
	defer st.mu.Unlock()
	s := RedriveStatus{Enabled: r.o.RedriveInterval > 0, Interval: r.o.RedriveInterval.String(),
		Lookback: r.o.RedriveLookback.String(), Cursor: st.cursor, Passes: make([]Redrive, 0, len(st.passes))}
	for i := len(st.passes) - 1; i >= 0; i-- {
		s.Passes = append(s.Passes, st.passes[i])
	}
	return s
}

// redriveStatus is GET /api/v1/redrive.
func (a *Replayer) redriveStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.RedriveStatus())
}
