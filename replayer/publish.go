package replayer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/internal/faults"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
)

// retryBackoff spaces the retries of a failing batch, from about 200ms up
// to 5s, until the replay's RetryFor runs out.
var retryBackoff = backoff.Backoff{Min: 200 * time.Millisecond, Max: 5 * time.Second}

// errStopped: this replayer must stop publishing the replay (shutdown, lost
// connection, fault injection); the replay stays running for the next one.
var errStopped = errors.New("replayer stopped")

// publish runs one locked replay until it is done, failed or cancelled
// (it returns true), or until this replayer must stop or cannot go on for
// now — shutdown, NATS or Postgres away — (false: the replay stays running
// and is picked up again at the next ResumeInterval, here or elsewhere).
func (r *Replayer) publish(ctx context.Context, lock *store.ReplayLock) (ended bool) {
	rep, err := lock.Replay(ctx)
	if err != nil {
		r.o.Log.Warn("replay: read failed", "err", err)
		return false
	}
	if rep.State != store.ReplayRunning {
		return true
	}
	log := r.o.Log.With("replay_id", rep.ID, "mode", rep.Mode)
	j := &job{r: r, lock: lock, rep: rep, stream: streamOf(rep.Mode), resumeFrom: rep.ResumeFromSeq,
		tracer: telemetry.Tracer(r.o.TracerProvider), faults: faults.From(ctx)}
	if rep.Mode == store.ReplayRedeliver {
		var rec recordedRedelivery
		if json.Unmarshal(rep.Selector, &rec) == nil {
			j.destination = rec.Destination
		}
	}
	if err := j.recover(ctx); err != nil {
		if ctx.Err() == nil {
			log.Warn("replay: resume scan failed; retrying later", "err", err)
		}
		return false
	}
	log.Info("replay publishing", "published", rep.Published, "matched", rep.Matched, "rate", rep.Rate)

	batch := min(max(rep.Rate/5, 1), 100) // about 200ms of publishing between records
	pace := newPacer(rep.Rate)
	lastProgress := time.Now()
	failures := 0
	for {
		items, err := lock.Pending(ctx, batch)
		if err == nil && len(items) == 0 {
			err = lock.Finish(ctx, store.ReplayDone, "")
			if err == nil {
				final, _ := lock.Replay(ctx)
				log.Info("replay done", "published", final.Published, "matched", final.Matched, "state", final.State)
				return true
			}
		}
		var state string
		if err == nil {
			state, err = j.publishBatch(ctx, items, pace)
		}
		switch {
		case errors.Is(err, errStopped) || ctx.Err() != nil:
			log.Info("replay paused: this replayer stops publishing it", "err", err)
			return false
		case lock.Lost():
			// Postgres stopped answering on the lock's connection (a
			// partition): retrying on it is useless. Resumed on a new one
			// at the next ResumeInterval, here or elsewhere.
			log.Warn("replay paused: its lock's connection to Postgres is lost", "err", err)
			return false
		case err == nil && state != store.ReplayRunning:
			log.Info("replay stopped", "state", state)
			return true
		case err == nil:
			lastProgress, failures = time.Now(), 0
			continue
		}
		if time.Since(lastProgress) > r.o.RetryFor {
			log.Error("replay failed", "err", err)
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = lock.Finish(fctx, store.ReplayFailed, err.Error())
			cancel()
			return true
		}
		wait := retryBackoff.Next(failures)
		failures++
		log.Warn("replay: batch failed; retrying", "err", err, "retry_in", wait)
		if backoff.Sleep(ctx, wait) != nil {
			return false
		}
	}
}

// job is one replayer's run of one replay.
type job struct {
	r          *Replayer
	lock       *store.ReplayLock
	rep        store.Replay
	stream     string
	src        jetstream.Stream // source stream of the items, looked up once
	in         jetstream.Stream // INTAKE_IN, for outbox rows whose payload it holds; looked up once
	resumeFrom uint64           // highest sequence known to precede every unconfirmed copy
	maxAcked   uint64
	// unconfirmed: copies sent whose PubAck never came (timeout, error).
	// They are retried first; until then resumeFrom must not move past them.
	unconfirmed map[string]bool
	tracer      trace.Tracer // nil: tracing off
	faults      faults.Hooks // from Run's context: tests only
	// destination, for a redelivery to one HTTP destination, is its name:
	// the copies go to intake.dispatch.{destination}.
	destination string
}

// subject is where a copy of a message first published on subject goes.
func (j *job) subject(subject string) string {
	if j.destination != "" {
		return envelope.SubjectDispatch(j.destination)
	}
	return subject
}

// recover finds copies of this replay that a previous replayer published
// but did not record (it died between PubAck and record) by scanning the
// target stream after the recorded position, and records them.
func (j *job) recover(ctx context.Context) error {
	pending, err := j.lock.HasPending(ctx)
	if err != nil || !pending {
		return err
	}
	header := envelope.HeaderReplayID
	if j.rep.Mode == store.ReplayRedeliver {
		header = HeaderRedeliveryID
	}
	found := map[string]uint64{}
	last, err := scanStream(ctx, j.r.o.JS, j.stream, scanRange{From: j.resumeFrom + 1}, func(m scanned) error {
		if m.Header.Get(header) == j.rep.ID {
			id := m.Header.Get(envelope.HeaderMsgID)
			if _, dup := found[id]; !dup {
				found[id] = m.Seq
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := j.lock.Record(ctx, store.Progress{Published: found, ResumeFromSeq: last}); err != nil {
		return err
	}
	if len(found) > 0 {
		j.r.o.Log.Info("replay: recorded copies a previous replayer published", "replay_id", j.rep.ID, "copies", len(found))
	}
	j.resumeFrom, j.maxAcked = max(j.resumeFrom, last), max(j.resumeFrom, last)
	return nil
}

type sent struct {
	item store.ReplayItem
	msg  *nats.Msg
	fut  jetstream.PubAckFuture
	span trace.Span // nil when tracing is off
}

// publishBatch publishes items in order, paced, waits for their PubAcks and
// records the outcome. It stops issuing at the first error (or shutdown),
// still records what was acked, and returns the error; items not acked stay
// pending and are retried.
func (j *job) publishBatch(ctx context.Context, items []store.ReplayItem, pace *pacer) (string, error) {
	var (
		out      []sent
		missing  []int
		batchErr error
	)
	for _, it := range items {
		if ctx.Err() != nil {
			batchErr = errStopped
			break
		}
		msg, err := j.build(ctx, it)
		if errors.Is(err, errGone) {
			missing = append(missing, it.Pos)
			continue
		}
		if err != nil {
			batchErr = err
			break
		}
		if err := pace.wait(ctx); err != nil {
			batchErr = errStopped
			break
		}
		span := j.startRepublish(msg, it)
		fut, err := j.r.o.JS.PublishMsgAsync(msg)
		if err != nil {
			endRepublish(span, err)
			batchErr = publishErr(err)
			break
		}
		j.unconfirmedAdd(it.MsgID)
		out = append(out, sent{item: it, msg: msg, fut: fut, span: span})
	}

	// Wait for every PubAck, also when stopping: what the stream took must
	// be recorded.
	prog := store.Progress{Published: map[string]uint64{}, Missing: missing}
	timeout := time.NewTimer(j.r.o.PublishTimeout)
	defer timeout.Stop()
wait:
	for i, s := range out {
		select {
		case ack := <-s.fut.Ok():
			endRepublish(s.span, nil)
			prog.Published[s.item.MsgID] = ack.Sequence
			if ack.Duplicate {
				prog.Duplicates++
			}
			j.maxAcked = max(j.maxAcked, ack.Sequence)
			delete(j.unconfirmed, s.item.MsgID)
		case err := <-s.fut.Err():
			endRepublish(s.span, err)
			if batchErr == nil {
				batchErr = publishErr(err)
			}
		case <-timeout.C:
			if batchErr == nil {
				batchErr = fmt.Errorf("no PubAck within %s", j.r.o.PublishTimeout)
			}
			for _, s := range out[i:] {
				endRepublish(s.span, batchErr)
			}
			break wait
		}
	}
	if len(j.unconfirmed) == 0 {
		j.resumeFrom = max(j.resumeFrom, j.maxAcked)
	}
	prog.ResumeFromSeq = j.resumeFrom

	if hook := j.faults.AfterPublish; hook != nil && len(prog.Published) > 0 {
		if err := hook(j.rep.ID, len(prog.Published)); err != nil {
			return "", fmt.Errorf("%w: %w", errStopped, err)
		}
	}
	// Record even while shutting down: the PubAcks are in hand.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	state, err := j.lock.Record(rctx, prog)
	if err != nil {
		// The lock's connection is gone: another replayer may own the
		// replay now. Stop; its resume scan finds what we published.
		return "", fmt.Errorf("%w: %w", errStopped, err)
	}
	j.r.metrics.published.WithLabelValues(j.rep.Mode).Add(float64(len(prog.Published)))
	return state, batchErr
}

func (j *job) unconfirmedAdd(id string) {
	if j.unconfirmed == nil {
		j.unconfirmed = map[string]bool{}
	}
	j.unconfirmed[id] = true
}

// publishErr classifies a publish error: a closed connection means this
// replayer is going away.
func publishErr(err error) error {
	if errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("%w: %w", errStopped, err)
	}
	return fmt.Errorf("publish: %w", err)
}

// build reads an item's source message and makes its copy.
func (j *job) build(ctx context.Context, it store.ReplayItem) (*nats.Msg, error) {
	if it.OutboxID != "" {
		row, err := j.r.o.Store.GetOutboxRow(ctx, it.OutboxID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, errGone
		}
		if err != nil {
			return nil, err
		}
		if row.PayloadSeq != 0 && row.Payload == nil { // the payload is INTAKE_IN's (migration 00023)
			if j.in == nil {
				if j.in, err = j.r.o.JS.Stream(ctx, envelope.StreamIn); err != nil {
					return nil, fmt.Errorf("stream %s: %w", envelope.StreamIn, err)
				}
			}
			body, sha, err := stream.InPayload(ctx, j.in, row.PayloadSeq, row.Key)
			if errors.Is(err, stream.ErrPayloadGone) {
				return nil, errGone
			} else if err != nil {
				return nil, err
			}
			row.SetStreamPayload(body, sha)
		}
		return redelivered(j.subject(row.Subject), nats.Header(row.Headers), row.Payload, it.MsgID, row.NatsMsgID(), j.rep.ID), nil
	}
	if j.src == nil {
		s, err := j.r.o.JS.Stream(ctx, j.stream)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", j.stream, err)
		}
		j.src = s
	}
	raw, err := j.src.GetMsg(ctx, it.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, errGone
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: get %d: %w", j.stream, it.StreamSeq, err)
	}
	if raw.Header.Get(envelope.HeaderKey) != it.Key.String() {
		return nil, errGone // the sequence now holds another message (stream recreated)
	}
	if j.rep.Mode == store.ReplayRedeliver {
		orig := raw.Header.Get(HeaderOriginalMsgID) // a copy's (a failed delivery of one): its original
		if orig == "" {
			orig = raw.Header.Get(envelope.HeaderMsgID)
		}
		if orig == "" {
			orig = envelope.SeqMsgID(raw.Sequence)
		}
		return redelivered(j.subject(raw.Subject), raw.Header, raw.Data, it.MsgID, orig, j.rep.ID), nil
	}
	h := copyHeader(raw.Header)
	h.Set(envelope.HeaderMsgID, it.MsgID)
	h.Set(envelope.HeaderReplayID, j.rep.ID)
	h.Set(envelope.HeaderReplayMode, j.rep.Mode)
	return &nats.Msg{Subject: raw.Subject, Header: h, Data: raw.Data}, nil
}

func redelivered(subject string, header nats.Header, data []byte, msgID, original, redeliveryID string) *nats.Msg {
	h := copyHeader(header)
	h.Set(envelope.HeaderMsgID, msgID)
	h.Set(HeaderOriginalMsgID, original)
	h.Set(HeaderRedeliveryID, redeliveryID)
	return &nats.Msg{Subject: subject, Header: h, Data: data}
}

// copyHeader copies every header except the publish-time expectations
// (Nats-Expected-*), which described the original publish, not this one.
func copyHeader(h nats.Header) nats.Header {
	out := make(nats.Header, len(h)+3)
	for k, v := range h {
		if strings.HasPrefix(k, "Nats-Expected-") {
			continue
		}
		out[k] = append([]string(nil), v...)
	}
	return out
}

// pacer spaces publishes at a rate: each waits for its slot; a late caller
// is not made up for with a burst beyond one slot.
type pacer struct {
	interval time.Duration
	next     time.Time
}

func newPacer(rate int) *pacer {
	return &pacer{interval: time.Second / time.Duration(max(rate, 1))}
}

func (p *pacer) wait(ctx context.Context) error {
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	if d := p.next.Sub(now); d > time.Millisecond {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	p.next = p.next.Add(p.interval)
	return nil
}
