package replayer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
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
// changes — from the first message published in it, the ack floor of a
// lookback ago, or where a scheduled pass would go on, whichever is lowest:
// the cursor never passes a sequence no pass checked. A message a re-drive
// replay already ran for that is still missing is unfixable, not replayed
// again. Messages the processor has not acked (pending) or refused on
// purpose (rejected) are never re-driven. A shard's replayer re-drives its
// shard's: the ack floor of processor-{shard}, its integrations' messages.

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
	// redriveFloorSamples: the ack floor is sampled at most this many
	// times per RedriveLookback (the ring a lookback pass reads).
	redriveFloorSamples = 128
	// redriveAttemptsKept bounds the sequences remembered as re-driven; one
	// forgotten early is at worst replayed once more.
	redriveAttemptsKept = 100_000
	// redriveUnfixableLogged bounds the sequences one error log names.
	redriveUnfixableLogged = 100
	// pgCallTimeout bounds each Postgres call of a re-drive pass (and of
	// the reconcile and replay plan it shares with the API): a Postgres
	// that stops answering — a partition that drops packets, which no
	// socket option of a loopback or proxied flow notices — fails the call
	// and the pass, visibly, instead of holding the pass, and every pass
	// after it, for good. pgx closes a connection whose call timed out.
	pgCallTimeout = store.ReplayLockTimeout
)

// pgBound is ctx within pgCallTimeout, for one Postgres call.
func pgBound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, pgCallTimeout)
}

// redriveState is a replayer's re-drive memory: in-process only; a new
// replayer starts with a lookback pass.
type redriveState struct {
	pass     sync.Mutex    // one pass at a time
	failover chan struct{} // a server change asks for a lookback pass

	mu     sync.Mutex
	cursor uint64 // highest sequence checked by a pass
	passes []apiclient.Redrive

	// Guarded by pass.
	floors   []floorSample               // the ack floor over the last RedriveLookback, oldest first
	attempts map[uint64]*redriveAttempt  // source sequences a re-drive replay covered
	afterFix map[uint64]deferredConflict // re-driven keys' other messages, judged once the key has its row
}

// deferredConflict is a settled message of a re-driven key that is not the
// one its replay runs: once the replay has written the key's row, a payload
// other than the row's is a conflict whose record the lost commit took.
type deferredConflict struct {
	c     store.ConflictRow // Original is filled from the row when judged
	since time.Time
}

// floorSample is the processor's ack floor read by a pass at (or just
// before) at.
type floorSample struct {
	at    time.Time
	floor uint64
}

// redriveAttempt is a source sequence a re-drive replay was started for.
type redriveAttempt struct {
	replayID string
	seen     time.Time // last pass that found it missing (or started the replay)
	// settleSeq is INTAKE_IN's last sequence once the replay had finished:
	// its copies are at or below, settled when the ack floor reaches it.
	settleSeq uint64
	reported  bool // logged as unfixable
}

// RedrivePass runs one re-drive pass now: a scheduled pass checks from where
// the last stopped (less a small overlap) up to the processor's ack floor; a
// start or failover pass (or the first one) checks messages of the last
// RedriveLookback. Missing events are replayed (exact mode, requested by
// RedriveRequester). Run calls it; tests and operators may too.
func (r *Replayer) RedrivePass(ctx context.Context, trigger apiclient.RedriveTrigger) (apiclient.Redrive, error) {
	st := &r.redrive
	st.pass.Lock()
	defer st.pass.Unlock()
	rec := apiclient.Redrive{Trigger: trigger, At: time.Now().UTC(), ReplayIDs: []string{}}
	err := r.redrivePass(ctx, &rec)
	if err != nil {
		rec.Error = err.Error()
	}
	r.metrics.redrivePasses.WithLabelValues(string(trigger)).Inc()
	st.mu.Lock()
	st.passes = append(st.passes, rec)
	if len(st.passes) > redriveKept {
		st.passes = append([]apiclient.Redrive(nil), st.passes[len(st.passes)-redriveKept:]...)
	}
	st.mu.Unlock()
	switch {
	case err != nil && ctx.Err() == nil:
		r.o.Log.Error("re-drive pass failed", "trigger", trigger, "from_seq", rec.FromSeq, "to_seq", rec.ToSeq,
			"redriven", rec.Redriven, "replay_ids", rec.ReplayIDs, "err", err)
	case rec.Redriven > 0 || rec.ConflictsRecorded > 0:
		r.o.Log.Warn("re-drove events the processor acknowledged without an inbox row (a commit lost in a Postgres "+
			"failover?)", "trigger", trigger, "redriven", rec.Redriven, "missing", rec.Missing, "from_seq", rec.FromSeq,
			"to_seq", rec.ToSeq, "truncated", rec.Truncated, "replay_ids", rec.ReplayIDs, "conflicts_recorded", rec.ConflictsRecorded,
			"unfixable", rec.Unfixable)
	}
	return rec, err
}

func (r *Replayer) redrivePass(ctx context.Context, rec *apiclient.Redrive) error {
	ackFloor, err := r.ackFloor(ctx)
	if err != nil {
		return err
	}
	st := &r.redrive
	now := time.Now()
	floorThen, sampled := st.floorAt(now.Add(-r.o.RedriveLookback))
	st.sampleFloor(now, ackFloor, r.o.RedriveLookback)
	st.pruneAttempts(now, 2*max(r.o.RedriveLookback, r.o.RedriveInterval))
	if err := r.judgeDeferredConflicts(ctx, rec, now, 2*max(r.o.RedriveLookback, r.o.RedriveInterval)); err != nil {
		return err
	}
	if ackFloor == 0 {
		return nil
	}
	first, _, err := streamBounds(ctx, r.o.JS, envelope.StreamIn)
	if err != nil {
		return err
	}
	st.mu.Lock()
	cursor := st.cursor
	st.mu.Unlock()
	overlap := r.redriveOverlap()
	var from uint64
	if rec.Trigger == apiclient.RedriveScheduled && cursor > 0 {
		from = cursor + 1 - min(cursor, overlap)
	} else {
		// A lookback pass starts at the lowest of: the first message
		// published in the lookback; the first a pass may not have checked
		// (what a scheduled pass would re-check), so the cursor never
		// passes a range nobody checked; the first above the ack floor of
		// RedriveLookback ago, for a message published long before it was
		// acked (handler retries, a backlog) whose commit is as recent.
		if from, err = r.firstSeqSince(ctx, now.Add(-r.o.RedriveLookback)); err != nil {
			return err
		}
		lower := func(seq uint64) {
			if from == 0 || seq < from {
				from = seq
			}
		}
		if cursor > 0 {
			lower(cursor + 1 - min(cursor, overlap))
		}
		if sampled {
			lower(floorThen + 1)
		}
		if from == 0 {
			return nil // nothing arrived in the lookback, nothing was checked before
		}
	}
	from = max(from, first)
	if from > ackFloor {
		return nil
	}
	rec.FromSeq = from
	// checked: every sequence from..checked was checked. The cursor moves
	// to it however the pass ends, so the next passes go on from there.
	checked, complete := from-1, false
	defer func() { st.advance(checked, complete, overlap) }()
	span := uint64(r.o.ReconcileMaxSpan)
	for lo, chunks := from, 0; lo <= ackFloor && chunks < redriveMaxChunks; chunks++ {
		hi := min(ackFloor, lo+span-1)
		res, err := r.runReconcile(ctx, ReconcileRequest{FromSeq: lo, ToSeq: hi}, span)
		if err != nil {
			return err
		}
		rec.Checked += res.Checked
		rec.Missing += len(res.Missing)
		st.deferConflicts(res.afterFix, time.Now())
		if len(res.lostConflicts) > 0 {
			pctx, cancel := pgBound(ctx)
			n, err := r.o.Store.RecordConflicts(pctx, res.lostConflicts)
			cancel()
			rec.ConflictsRecorded += n
			r.metrics.redrivenConflicts.Add(float64(n))
			if err != nil {
				return err
			}
		}
		if res.Fix != nil {
			if err := r.redriveFix(ctx, rec, res, lo, hi); err != nil {
				return err
			}
		}
		rec.ToSeq = hi
		if res.Truncated {
			// Go on after the last listed one next time, even if a
			// scheduled pass had gone further.
			rec.ToSeq, rec.Truncated = res.Missing[len(res.Missing)-1].StreamSeq, true
			checked = rec.ToSeq
			return nil
		}
		checked, lo = hi, hi+1
	}
	complete = checked == ackFloor
	return nil
}

// redriveOverlap is how many sequences a scheduled pass re-checks below the
// cursor: redriveOverlap, or less when a pass checks fewer than twice that
// (a small ReconcileMaxSpan), so that passes still make progress.
func (r *Replayer) redriveOverlap() uint64 {
	return min(redriveOverlap, uint64(r.o.ReconcileMaxSpan)*redriveMaxChunks/2)
}

// advance moves the cursor after a pass that checked up to checked (all of
// its range when complete). A pass that stopped short (out of chunks,
// truncated, failed) below where the next scheduled pass would start leaves
// the cursor there, lower than before: the rest is checked next.
func (st *redriveState) advance(checked uint64, complete bool, overlap uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !complete && checked+1 < st.cursor+1-min(st.cursor, overlap) {
		st.cursor = checked
		return
	}
	st.cursor = max(st.cursor, checked)
}

// floorAt is the ack floor sampled last at or before t (the oldest sample
// when none is that old: the replayer is younger than the lookback);
// ok is false before the first sample.
func (st *redriveState) floorAt(t time.Time) (floor uint64, ok bool) {
	for i, s := range st.floors {
		if i > 0 && s.at.After(t) {
			break
		}
		floor, ok = s.floor, true
	}
	return floor, ok
}

// sampleFloor adds the ack floor read at now to the ring (at most
// redriveFloorSamples per lookback), dropping samples no future floorAt
// can return: the ring spans the last lookback and one sample more.
func (st *redriveState) sampleFloor(now time.Time, floor uint64, lookback time.Duration) {
	if n := len(st.floors); n == 0 || now.Sub(st.floors[n-1].at) >= lookback/redriveFloorSamples {
		st.floors = append(st.floors, floorSample{at: now, floor: floor})
	}
	cut := 0
	for cut+1 < len(st.floors) && !st.floors[cut+1].at.After(now.Add(-lookback)) {
		cut++
	}
	st.floors = st.floors[cut:]
}

// pruneAttempts forgets sequences no pass has found missing for keep, and
// any beyond redriveAttemptsKept.
func (st *redriveState) pruneAttempts(now time.Time, keep time.Duration) {
	for seq, a := range st.attempts {
		if now.Sub(a.seen) > keep || len(st.attempts) > redriveAttemptsKept {
			delete(st.attempts, seq)
		}
	}
}

// redriveFix starts fix for real, without the keys a running replay has yet
// to publish and the messages a re-drive replay already ran for (counted
// unfixable once their replay's copies are settled).
func (r *Replayer) redriveFix(ctx context.Context, rec *apiclient.Redrive, res ReconcileResult, lo, hi uint64) error {
	fix := *res.Fix
	keys := parseKeys(fix.Selector.Keys)
	pctx, cancel := pgBound(ctx)
	queued, err := r.o.Store.QueuedForReplay(pctx, keys)
	cancel()
	if err != nil {
		return err
	}
	var waiting []apiclient.MissingEvent
	for _, m := range res.Missing {
		if k, ok := envelope.ParseKey(m.Key); ok && !queued[k] {
			waiting = append(waiting, m)
		}
	}
	fresh, err := r.triage(ctx, rec, waiting, res.AckFloor)
	if err != nil {
		return err
	}
	if len(fresh) == 0 {
		return nil
	}
	fix.Selector.Keys = make([]string, len(fresh))
	for i, m := range fresh {
		fix.Selector.Keys[i] = m.Key
	}
	dryRun := false
	fix.DryRun = &dryRun
	fix.Reason = fmt.Sprintf("redrive (%s pass): %d events acknowledged without an inbox row in %s %d..%d",
		rec.Trigger, len(fix.Selector.Keys), envelope.StreamIn, lo, hi)
	// The attempts are remembered before the replay is started: a
	// Postgres that stops answering at its commit may have recorded it
	// (the commit made, the answer lost). The next pass then reads its
	// state (triage) instead of starting another: recorded, it runs
	// (Run resumes it); not recorded, it is not found and its messages are
	// re-driven again.
	id := uuid.NewString()
	st := &r.redrive
	if st.attempts == nil {
		st.attempts = map[uint64]*redriveAttempt{}
	}
	now := time.Now()
	for _, m := range fresh {
		st.attempts[m.StreamSeq] = &redriveAttempt{replayID: id, seen: now}
	}
	rep, err := r.replay(ctx, id, RedriveRequester, fix)
	if err != nil {
		return fmt.Errorf("redrive: start replay %s: %w", id, err)
	}
	n := int(rep.Matched - rep.Outcomes[Missing])
	rec.Redriven += n
	rec.ReplayIDs = append(rec.ReplayIDs, rep.ID)
	r.metrics.redriven.Add(float64(n))
	return nil
}

// triage returns the missing messages no re-drive replay of this replayer
// ran for yet. The others are in flight (their replay runs, or its copies
// are not settled) or unfixable: still missing after their copy was
// settled — the processor rejected it again under the copy's sequence, or
// terminated it without a record. Replaying those again would loop.
func (r *Replayer) triage(ctx context.Context, rec *apiclient.Redrive, missing []apiclient.MissingEvent, ackFloor uint64) ([]apiclient.MissingEvent, error) {
	st := &r.redrive
	now := time.Now()
	states := map[string]string{} // replay id → state, read once per call
	var lastSeq uint64
	var fresh []apiclient.MissingEvent
	var found []uint64
	for _, m := range missing {
		a := st.attempts[m.StreamSeq]
		if a == nil {
			fresh = append(fresh, m)
			continue
		}
		a.seen = now
		if a.settleSeq == 0 {
			state, ok := states[a.replayID]
			if !ok {
				pctx, cancel := pgBound(ctx)
				rep, err := r.o.Store.GetReplay(pctx, a.replayID)
				cancel()
				switch {
				case errors.Is(err, store.ErrNotFound):
					state = store.ReplayFailed
				case err != nil:
					return nil, err
				default:
					state = rep.State
				}
				states[a.replayID] = state
			}
			switch state {
			case store.ReplayRunning:
				continue
			case store.ReplayFailed: // it may not have published: try again
				delete(st.attempts, m.StreamSeq)
				fresh = append(fresh, m)
				continue
			}
			if lastSeq == 0 {
				var err error
				if _, lastSeq, err = streamBounds(ctx, r.o.JS, envelope.StreamIn); err != nil {
					return nil, err
				}
			}
			a.settleSeq = lastSeq
		}
		if ackFloor < a.settleSeq {
			continue
		}
		rec.Unfixable++
		if !a.reported {
			a.reported = true
			found = append(found, m.StreamSeq)
		}
	}
	if len(found) > 0 {
		r.metrics.redriveUnfixable.Add(float64(len(found)))
		r.o.Log.Error("re-drive cannot fix messages the processor acknowledged without an inbox row: a re-drive "+
			"replay ran for them and they are still missing (rejected again under the copy's sequence, or terminated "+
			"without a record, e.g. no tenant header); not replayed again. Inspect GET /api/v1/rejections and the "+
			"messages at these INTAKE_IN sequences; once the cause is fixed, run `intake replay` for them by hand",
			"stream_seqs", found[:min(len(found), redriveUnfixableLogged)], "count", len(found), "trigger", rec.Trigger)
	}
	return fresh, nil
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
	trigger := apiclient.RedriveStart
	for {
		_, _ = r.RedrivePass(ctx, trigger) // logged inside
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			trigger = apiclient.RedriveScheduled
		case <-r.redrive.failover:
			trigger = apiclient.RedriveFailover
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

// RedriveStatus reports this replayer's re-drive settings and last passes.
func (r *Replayer) RedriveStatus() apiclient.RedriveStatus {
	st := &r.redrive
	st.mu.Lock()
	defer st.mu.Unlock()
	s := apiclient.RedriveStatus{Enabled: r.o.RedriveInterval > 0, Interval: r.o.RedriveInterval.String(),
		Lookback: r.o.RedriveLookback.String(), Cursor: st.cursor, Passes: make([]apiclient.Redrive, 0, len(st.passes))}
	for i := len(st.passes) - 1; i >= 0; i-- {
		s.Passes = append(s.Passes, st.passes[i])
	}
	return s
}

// redriveStatus is GET /api/v1/redrive.
func (r *Replayer) redriveStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, r.RedriveStatus())
}

// deferConflicts remembers the re-driven keys' other messages until their
// keys have rows again.
func (st *redriveState) deferConflicts(cs []store.ConflictRow, now time.Time) {
	if len(cs) == 0 {
		return
	}
	if st.afterFix == nil {
		st.afterFix = map[uint64]deferredConflict{}
	}
	for _, c := range cs {
		if _, ok := st.afterFix[c.StreamSeq]; !ok && len(st.afterFix) < redriveAttemptsKept {
			st.afterFix[c.StreamSeq] = deferredConflict{c: c, since: now}
		}
	}
}

// judgeDeferredConflicts records the conflicts of deferred messages whose
// key has its row again with another payload (and no record of them yet);
// a message with the row's payload was a duplicate. A key still without a
// row waits, up to keep.
func (r *Replayer) judgeDeferredConflicts(ctx context.Context, rec *apiclient.Redrive, now time.Time, keep time.Duration) error {
	st := &r.redrive
	if len(st.afterFix) == 0 {
		return nil
	}
	keys := make([]envelope.Key, 0, len(st.afterFix))
	for _, d := range st.afterFix {
		keys = append(keys, d.c.Key)
	}
	pctx, cancel := pgBound(ctx)
	rows, err := r.o.Store.LookupInbox(pctx, keys)
	cancel()
	if err != nil {
		return err
	}
	var judged []store.ConflictRow
	for seq, d := range st.afterFix {
		row, ok := rows[d.c.Key]
		switch {
		case !ok && now.Sub(d.since) > keep:
			delete(st.afterFix, seq)
		case !ok:
		case row.PayloadSHA256 == d.c.PayloadSHA256 || row.StreamSeq == seq || row.Tenant != d.c.Tenant:
			delete(st.afterFix, seq) // a duplicate, the row's own message, or a rejection's
		default:
			c := d.c
			c.Original = inbox.Row{PayloadSHA256: row.PayloadSHA256, StreamSeq: row.StreamSeq, Status: row.Status}
			judged = append(judged, c)
			delete(st.afterFix, seq)
		}
	}
	if len(judged) == 0 {
		return nil
	}
	lost, err := r.lostConflicts(ctx, judged, map[uint64]bool{})
	if err != nil {
		return err
	}
	pctx, cancel = pgBound(ctx)
	n, err := r.o.Store.RecordConflicts(pctx, lost)
	cancel()
	rec.ConflictsRecorded += n
	r.metrics.redrivenConflicts.Add(float64(n))
	return err
}
