package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
)

// rawStream is reference (b)'s stream: INTAKE_IN's configuration under
// another name and subject.
func rawStream(ctx context.Context, js jetstream.JetStream, size int) (string, error) {
	subj := fmt.Sprintf("bench.raw.%d", size)
	return subj, streamLike(ctx, js, stream.InConfig, rawStreamName(size), subj)
}

// streamLike creates a reference's stream: name on subj, configured as
// Intake's own by like (stream.InConfig or stream.OutConfig).
func streamLike(ctx context.Context, js jetstream.JetStream, like func(config.Stream) jetstream.StreamConfig, name, subj string) error {
	sc := like(config.Stream{Replicas: 1, MaxAge: time.Hour, DuplicateWindow: config.DefaultDuplicateWindow, MaxBytes: -1})
	sc.Name, sc.Subjects = name, []string{subj}
	_, err := js.CreateOrUpdateStream(ctx, sc)
	return err
}

func rawStreamName(size int) string { return fmt.Sprintf("BENCH_RAW_%d", size) }

func rawMsg(subj string, body []byte, i int64) *nats.Msg {
	m := nats.NewMsg(subj)
	m.Data = body
	m.Header.Set(envelope.HeaderMsgID, fmt.Sprintf("raw/acct/evt_%d#0123456789abcdef", i))
	return m
}

// publishSync is (b) sync: conns publishers, each waiting for its PubAck.
func publishSync(ctx context.Context, js jetstream.JetStream, subj string, body []byte, conns int, dur time.Duration) (float64, error) {
	var next atomic.Int64
	rate, err := closedLoop(ctx, conns, dur, func() func() (int, error) {
		return func() (int, error) {
			_, err := js.PublishMsg(ctx, rawMsg(subj, body, next.Add(1)))
			return 1, err
		}
	})
	if err != nil {
		return 0, fmt.Errorf("raw publish: %w", err)
	}
	return rate, nil
}

// closedLoop runs workers loops of the step each newStep makes (one per
// worker, with its own state) until dur has passed, and returns the
// steps' counts per second, or the first error a step returned.
func closedLoop(ctx context.Context, workers int, dur time.Duration, newStep func() func() (int, error)) (float64, error) {
	var n atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	deadline := start.Add(dur)
	var wg sync.WaitGroup
	for range workers {
		step := newStep()
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				k, err := step()
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				n.Add(int64(k))
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return 0, err
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// publishAsync is (b) async: one publisher with up to 4096 PubAcks pending.
func publishAsync(ctx context.Context, nc *nats.Conn, subj string, body []byte, dur time.Duration) (float64, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return 0, err
	}
	start := time.Now()
	deadline := start.Add(dur)
	var n int64
	var futures []jetstream.PubAckFuture
	await := func() error {
		for _, f := range futures {
			select {
			case <-f.Ok():
				n++
			case err := <-f.Err():
				return fmt.Errorf("raw async publish: %w", err)
			}
		}
		futures = futures[:0]
		return nil
	}
	for i := int64(0); time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		f, err := js.PublishMsgAsync(rawMsg(subj, body, 1<<40+i))
		if err != nil {
			return 0, fmt.Errorf("raw async publish: %w", err)
		}
		if futures = append(futures, f); len(futures) >= 4096 {
			if err := await(); err != nil {
				return 0, err
			}
		}
	}
	if err := await(); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// pgWrites is (c) and (d): the processor's writes for a batch of events —
// the inbox claim, one delivery-history row, one execution and one outbox
// row (with its pending id; its payload left in INTAKE_IN, as Forward's
// are) each — straight into Postgres, batch events per
// transaction, workers transactions at a time. With claimsOnly, only the
// inbox claims: the one row exactly-once needs (the system's floor shows
// both).
func pgWrites(ctx context.Context, st *store.Store, body []byte, batch, workers int, dur time.Duration, prefix string, claimsOnly bool) (pgRate, error) {
	var n, next atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	deadline := start.Add(dur)
	sha := envelope.PayloadSHA256(body)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				var rows eventRows
				for range batch {
					i := next.Add(1)
					rows.add(fmt.Sprintf("%s_%d", prefix, i), uint64(i), sha, body, claimsOnly)
				}
				if err := rows.write(ctx, st, claimsOnly); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				n.Add(int64(batch))
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return pgRate{}, fmt.Errorf("postgres writes: %w", err)
	}
	return pgRate{events: n.Load(), secs: time.Since(start).Seconds()}, nil
}

// eventRows are the rows the processor writes for a batch of events, as
// (c) writes them.
type eventRows struct {
	claims []store.BatchClaim
	w      store.BatchWrites
}

// add is one event's rows: its claim, and unless claimsOnly its delivery
// history row, execution and outbox row (the payload left in the stream at
// seq, as Forward's).
func (r *eventRows) add(eventID string, seq uint64, sha string, body []byte, claimsOnly bool) {
	k := envelope.Key{Integration: "bench", Account: "a", EventID: eventID}
	now := time.Now()
	r.claims = append(r.claims, store.BatchClaim{Claim: store.Claim{Key: k, Tenant: "t", EventType: "bench.event",
		PayloadSHA256: sha, StreamSeq: seq, ReceivedAt: now}})
	if claimsOnly {
		return
	}
	r.w.FirstDeliveries = append(r.w.FirstDeliveries, store.DeliveryRecord{ReceiptID: envelope.StreamReceiptID(seq),
		Key: k, ReceivedAt: now, Instance: "bench", StatusCode: 200, Answer: "accepted"})
	id := store.NewID()
	r.w.Executions = append(r.w.Executions, store.Execution{ID: id, Key: k, Mode: inbox.ModeOriginal, StreamSeq: seq})
	// The headers the built-in forward's row has (the store leaves out
	// those the row gives back, as it does the processor's).
	r.w.Outbox = append(r.w.Outbox, store.OutboxRow{Key: k, MsgID: envelope.OutboxMsgID(k, inbox.ModeOriginal, "", 0), Subject: "intake.out.t.bench.bench_event",
		Headers: map[string][]string{envelope.HeaderKey: {k.String()}, envelope.HeaderIntegration: {k.Integration},
			envelope.HeaderTenant: {"t"}, envelope.HeaderAccount: {k.Account}, envelope.HeaderEventID: {k.EventID},
			envelope.HeaderEventType: {"bench.event"}, envelope.HeaderPayloadSHA256: {sha},
			envelope.HeaderReceivedAt: {now.UTC().Format(time.RFC3339Nano)}, envelope.HeaderExecutionID: {id}},
		Payload: body, PayloadSeq: seq})
}

// write writes the rows in one transaction.
func (r *eventRows) write(ctx context.Context, st *store.Store, claimsOnly bool) error {
	return pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		if _, _, err := store.ClaimBatch(ctx, tx, r.claims); err != nil || claimsOnly {
			return err
		}
		return r.w.Flush(ctx, tx)
	})
}

// pgRate is events written in so many seconds, over one or more slices,
// and the machine's busy time meanwhile when measured.
type pgRate struct {
	events int64
	secs   float64
	cpu    cpuReading
}

func (r *pgRate) add(o pgRate) {
	r.events, r.secs, r.cpu = r.events+o.events, r.secs+o.secs, r.cpu.add(o.cpu)
}
func (r pgRate) rate() float64 { return float64(r.events) / r.secs }

// cpuPer is the CPU spent per event written: the machine's, this
// process's (the client) and Postgres's.
func (r pgRate) cpuPer() cpuReading { return r.cpu.per(float64(r.events)) }

// busyPer runs run, which returns events per second over its own time,
// and returns that rate with the machine's busy time per event over the
// same time (every process on the host and the kernel's work for them).
func busyPer(run func() (float64, error)) (rate float64, per time.Duration, err error) {
	t0, busy0 := time.Now(), machineBusy()
	rate, err = run()
	busy, el := machineBusy()-busy0, time.Since(t0)
	if err != nil || rate <= 0 {
		return rate, 0, err
	}
	return rate, time.Duration(float64(busy) / (rate * el.Seconds())), nil
}

// pgRefs measures (c) and then (d) for dur each, with a CHECKPOINT after
// each so neither the next measurement nor the processor pays for their
// writes. Round keeps each call's event ids apart.
func pgRefs(ctx context.Context, log *slog.Logger, st *store.Store, body []byte, dur time.Duration, round int, meter cpuMeter, batched, single *pgRate) error {
	cpu0 := meter.read()
	b, err := pgWrites(ctx, st, body, 256, 2, dur, fmt.Sprintf("batched%d", round), false)
	if err != nil {
		return err
	}
	b.cpu = meter.read().sub(cpu0)
	batched.add(b)
	if _, err := st.Pool().Exec(ctx, `CHECKPOINT`); err != nil { // (d) must not pay for (c)'s writes
		return err
	}
	s, err := pgWrites(ctx, st, body, 1, 8, dur, fmt.Sprintf("single%d", round), false)
	if err != nil {
		return err
	}
	single.add(s)
	log.Info("postgres references", "round", round, "batched_per_second", int(b.rate()), "single_per_second", int(s.rate()))
	return cleanTables(ctx, st)
}

// cleanTables empties the tables the processor and (c), (d) write, and
// writes back what they left.
func cleanTables(ctx context.Context, st *store.Store) error {
	if _, err := st.Pool().Exec(ctx, `TRUNCATE intake.inbox, intake.deliveries, intake.outbox, intake.outbox_pending, intake.executions`); err != nil {
		return err
	}
	_, err := st.Pool().Exec(ctx, `CHECKPOINT`)
	return err
}

// natsHalf is reference (e): the processor's JetStream work without
// Postgres — from a backlog in a stream configured like INTAKE_IN (inName,
// (b)'s messages), batches fetched through a pull consumer, each message
// published to a stream configured like INTAKE_OUT with async PubAcks,
// every PubAck awaited, then each message acked: batch messages at a time,
// workers batches in flight, as the processor's defaults do. It returns
// messages per second over dur, or an error when the backlog runs out.
func natsHalf(ctx context.Context, js jetstream.JetStream, inName string, size, batch, workers int, dur time.Duration) (float64, error) {
	loop, err := drainLike(ctx, js, inName, natsHalfOutName(size), fmt.Sprintf("bench.e.%d", size), "bench-e", batch, workers, nil)
	if err == nil {
		var rate float64
		if rate, err = loop(dur); err == nil {
			return rate, nil
		}
	}
	return 0, fmt.Errorf("reference (e): %w", err)
}

// bareProcessor is reference (c+e): (c)'s rows and (e)'s JetStream work
// in one loop, as the processor does them but in series — a batch fetched
// from (b)'s backlog (whose bodies are all one, of hash sha), its events'
// rows written in one transaction, each message published to a stream
// configured like INTAKE_OUT (bareProcessorOutName, left for the caller to
// delete), the PubAcks awaited, the batch acked — and nothing else: no
// envelope check, no decoding, no handler. It returns the rate and, from
// meter read around the loop alone, the CPU per event.
func bareProcessor(ctx context.Context, js jetstream.JetStream, st *store.Store, meter cpuMeter, inName, sha string, size, batch, workers int, dur time.Duration) (float64, cpuReading, error) {
	var next atomic.Int64
	loop, err := drainLike(ctx, js, inName, bareProcessorOutName(size), fmt.Sprintf("bench.ce.%d", size), "bench-ce", batch, workers,
		func(msgs []jetstream.Msg) error {
			var rows eventRows
			for _, m := range msgs {
				i := next.Add(1)
				rows.add(fmt.Sprintf("ce_%d", i), uint64(i), sha, m.Data(), false)
			}
			return rows.write(ctx, st, false)
		})
	if err != nil {
		return 0, cpuReading{}, fmt.Errorf("reference (c+e): %w", err)
	}
	t0, cpu0 := time.Now(), meter.read()
	rate, err := loop(dur)
	cpu, el := meter.read().sub(cpu0), time.Since(t0)
	if err != nil {
		return 0, cpuReading{}, fmt.Errorf("reference (c+e): %w", err)
	}
	return rate, cpu.per(rate * el.Seconds()), nil
}

func bareProcessorOutName(size int) string { return fmt.Sprintf("BENCH_CE_OUT_%d", size) }

// drainLike prepares a drain of a backlog in a stream configured like
// INTAKE_IN (inName) as the processor does it, and returns the drain: for
// dur, batches fetched through a pull consumer (durable), write (when set)
// run on each, each message published to a stream configured like
// INTAKE_OUT (outName, on outSubj) with async PubAcks, every PubAck
// awaited, then each message acked: batch messages at a time, workers
// batches in flight. The drain returns messages per second, or an error
// when the backlog runs out.
func drainLike(ctx context.Context, js jetstream.JetStream, inName, outName, outSubj, durable string, batch, workers int,
	write func([]jetstream.Msg) error) (drain func(dur time.Duration) (float64, error), err error) {
	if err := streamLike(ctx, js, stream.OutConfig, outName, outSubj); err != nil {
		return nil, err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, inName, jetstream.ConsumerConfig{Durable: durable,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxAckPending: 4 * batch * workers})
	if err != nil {
		return nil, err
	}
	var done atomic.Int64
	return func(dur time.Duration) (float64, error) {
		return closedLoop(ctx, workers, dur, func() func() (int, error) {
			msgs := make([]jetstream.Msg, 0, batch)
			futures := make([]jetstream.PubAckFuture, 0, batch)
			return func() (int, error) {
				b, err := cons.Fetch(batch, jetstream.FetchMaxWait(time.Second))
				if err != nil {
					return 0, err
				}
				msgs = msgs[:0]
				for m := range b.Messages() {
					msgs = append(msgs, m)
				}
				if len(msgs) == 0 {
					return 0, fmt.Errorf("%w after %d messages", errBacklogRanOut, done.Load())
				}
				if write != nil {
					if err := write(msgs); err != nil {
						return 0, err
					}
				}
				futures = futures[:0]
				for _, m := range msgs {
					f, err := js.PublishMsgAsync(&nats.Msg{Subject: outSubj, Header: nats.Header(m.Headers()), Data: m.Data()})
					if err != nil {
						return 0, err
					}
					futures = append(futures, f)
				}
				for _, f := range futures {
					select {
					case <-f.Ok():
					case err := <-f.Err():
						return 0, err
					case <-ctx.Done():
						return 0, ctx.Err()
					}
				}
				for _, m := range msgs {
					_ = m.Ack()
				}
				done.Add(int64(len(msgs)))
				return len(msgs), nil
			}
		})
	}, nil
}

// errBacklogRanOut: reference (e) found no message left to drain.
var errBacklogRanOut = errors.New("the backlog ran out")

func natsHalfOutName(size int) string { return fmt.Sprintf("BENCH_E_OUT_%d", size) }
