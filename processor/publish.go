package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
)

// pubAckTimeout bounds the wait for INTAKE_OUT's PubAcks.
const pubAckTimeout = 10 * time.Second

// published is what publishRows got back.
type published struct {
	ok     []string // ids with a PubAck
	dups   int      // of those, how many INTAKE_OUT already held (duplicate window)
	failed []string // ids without one
	err    error    // the first failure
}

// publishRows sends outbox rows to INTAKE_OUT and waits for every PubAck.
// Publishing a row twice is harmless inside INTAKE_OUT's duplicate window:
// the copy is dropped.
func publishRows(ctx context.Context, js jetstream.JetStream, rows []store.OutboxRow, tracer trace.Tracer) published {
	return sendRows(js, rows, tracer).wait(ctx, pubAckTimeout)
}

// sent is a batch of outbox rows handed to JetStream, PubAcks outstanding.
type sent struct {
	rows    []store.OutboxRow
	futures []jetstream.PubAckFuture // nil where the publish failed at once
	// spans are the rows' publish spans (startOutboxPublish), ended with
	// their PubAck; nil when tracing is off.
	spans []trace.Span
	res   published
}

// sendRows publishes rows asynchronously, Nats-Msg-Id = the row's
// NatsMsgID (derived from the event's key: envelope.OutboxMsgID), in order. It adds that header to each row's Headers: the rows are committed
// (their headers already written) and serve no other purpose afterwards.
// With a tracer, a row that carries its event's trace gets a publish span
// (intake.outbox.publish), named by its traceparent on INTAKE_OUT.
func sendRows(js jetstream.JetStream, rows []store.OutboxRow, tracer trace.Tracer) *sent {
	s := &sent{rows: rows, futures: make([]jetstream.PubAckFuture, len(rows))}
	for i, row := range rows {
		h := nats.Header(row.Headers)
		if h == nil {
			h = nats.Header{}
		}
		h.Set(envelope.HeaderMsgID, row.NatsMsgID())
		if span := startOutboxPublish(tracer, &rows[i]); span != nil {
			if s.spans == nil {
				s.spans = make([]trace.Span, len(rows))
			}
			s.spans[i] = span
		}
		f, err := js.PublishMsgAsync(&nats.Msg{Subject: row.Subject, Header: h, Data: row.Payload})
		if err != nil {
			s.res.fail(row.ID, err)
			s.endSpan(i, err)
			continue
		}
		s.futures[i] = f
	}
	return s
}

// wait collects the PubAcks, for at most timeout in all (or until ctx
// ends). A PubAck that arrived in time counts even when the deadline has
// passed by the time its turn comes.
func (s *sent) wait(ctx context.Context, timeout time.Duration) published {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s.res.ok = make([]string, 0, len(s.rows))
	for i, f := range s.futures {
		if f == nil {
			continue
		}
		id := s.rows[i].ID
		var err error
		select {
		case ack := <-f.Ok():
			s.res.acked(id, ack)
		case err = <-f.Err():
			s.res.fail(id, err)
		case <-ctx.Done():
			select {
			case ack := <-f.Ok():
				s.res.acked(id, ack)
			case err = <-f.Err():
				s.res.fail(id, err)
			default:
				err = ctx.Err()
				if errors.Is(err, context.DeadlineExceeded) {
					err = fmt.Errorf("no PubAck within %s", timeout)
				}
				s.res.fail(id, err)
			}
		}
		s.endSpan(i, err)
	}
	return s.res
}

// endSpan ends row i's publish span, if it has one.
func (s *sent) endSpan(i int, err error) {
	if s.spans == nil || s.spans[i] == nil {
		return
	}
	if err != nil {
		s.spans[i].SetStatus(codes.Error, "publish failed")
	}
	s.spans[i].End()
}

func (r *published) acked(id string, ack *jetstream.PubAck) {
	r.ok = append(r.ok, id)
	if ack.Duplicate {
		r.dups++
	}
}

func (r *published) fail(id string, err error) {
	r.failed = append(r.failed, id)
	if r.err == nil {
		r.err = fmt.Errorf("publish outbox %s: %w", id, err)
	}
}

// acker waits for the PubAcks of the batches the processor published,
// off the batch workers' path (a worker starts its next transaction while
// the stream stores the last one's rows), and hands the acknowledged ids to
// the marker.
type acker struct {
	mk      *marker
	metrics *telemetry.Metrics
	log     *slog.Logger
	in      chan *sent
	done    chan struct{}
	// grace bounds close: the batches still queued then share it, where
	// each would wait pubAckTimeout on its own (minutes while NATS is
	// away). What is not acknowledged by then stays for the relay.
	grace  time.Duration
	ctx    context.Context
	cancel context.CancelFunc
}

func newAcker(mk *marker, m *telemetry.Metrics, log *slog.Logger) *acker {
	a := &acker{mk: mk, metrics: m, log: log, in: make(chan *sent, ackerQueue), done: make(chan struct{}), grace: pubAckTimeout}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	go a.run()
	return a
}

// ackerQueue batches may wait for their PubAcks. With the default batch
// size that stays under nats.go's 4,000 pending asynchronous publishes,
// beyond which a publish stalls the batch worker.
const ackerQueue = 8

// add queues a sent batch; it blocks while ackerQueue batches wait for
// PubAcks.
func (a *acker) add(s *sent) { a.in <- s }

// close waits for what is queued, for at most grace in all, and stops.
func (a *acker) close() {
	close(a.in)
	t := time.AfterFunc(a.grace, a.cancel)
	<-a.done
	t.Stop()
	a.cancel()
}

func (a *acker) run() {
	defer close(a.done)
	for s := range a.in {
		res := s.wait(a.ctx, pubAckTimeout)
		if res.err != nil {
			// The rows are durable and stay pending: the relay publishes
			// them after outbox.relay_after.
			a.log.Warn("publishing committed outbox rows failed; the relay will retry them", "rows", len(res.failed), "err", res.err)
		}
		a.metrics.OutboxPublished.Add(float64(len(res.ok) - res.dups))
		a.mk.add(res.ok)
	}
}

// marker takes the ids the processor published off the pending list, many
// batches' worth per statement.
type marker struct {
	store   *store.Store
	log     *slog.Logger
	skipped prometheus.Counter // ids left to the relay
	in      chan []string
	done    chan struct{}
}

const (
	// markEvery is how long published ids wait to be marked.
	markEvery = 50 * time.Millisecond
	// markMax ids are marked at once; while marking fails (Postgres away)
	// up to markKeep wait for the next try, the rest are left pending.
	markMax  = 4096
	markKeep = 64 * 1024
)

func newMarker(st *store.Store, skipped prometheus.Counter, log *slog.Logger) *marker {
	m := &marker{store: st, log: log, skipped: skipped, in: make(chan []string, 64), done: make(chan struct{})}
	go m.run()
	return m
}

// add queues published ids. It never blocks a batch: ids the marker has no
// room for stay pending, and the relay publishes them again under the same
// Nats-Msg-Id (INTAKE_OUT drops the copy).
func (m *marker) add(ids []string) {
	if len(ids) == 0 {
		return
	}
	select {
	case m.in <- ids:
	default:
		m.skipped.Add(float64(len(ids)))
		m.log.Debug("outbox marker behind; leaving published rows to the relay", "rows", len(ids))
	}
}

// close marks what is queued and stops.
func (m *marker) close() {
	close(m.in)
	<-m.done
}

func (m *marker) run() {
	defer close(m.done)
	var ids []string
	flush := func() {
		if len(ids) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.store.MarkPublished(ctx, ids); err != nil {
			m.log.Warn("marking published outbox rows failed; will retry", "rows", len(ids), "err", err)
			if len(ids) > markKeep {
				m.skipped.Add(float64(len(ids) - markKeep))
				ids = ids[len(ids)-markKeep:] // the oldest are the relay's first anyway
			}
			return
		}
		ids = ids[:0]
	}
	t := time.NewTicker(markEvery)
	defer t.Stop()
	for {
		select {
		case b, ok := <-m.in:
			if !ok {
				flush()
				return
			}
			ids = append(ids, b...)
			if len(ids) >= markMax {
				flush()
			}
		case <-t.C:
			flush()
		}
	}
}
