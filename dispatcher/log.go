package dispatcher

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
)

// entry is one attempt done: its log row, and what to tell JetStream once
// the row is written.
type entry struct {
	row  store.DispatchAttempt
	msg  jetstream.Msg
	wait time.Duration // with outcome retry: the nak's delay
}

// Sizes of the delivery log writer.
const (
	// logBatch is the most rows one COPY writes.
	logBatch = 512
	// logFill and logLinger: a batch smaller than logFill waits up to
	// logLinger after its first entry for more. Postgres's cost is mostly
	// per statement and commit, so a busy destination's rows go in dozens
	// (a quarter less Postgres CPU per delivery than the few a write
	// found waiting, BENCHMARKS.md); an idle one's ack waits 2 ms.
	logFill   = 64
	logLinger = 2 * time.Millisecond
	// logQueue is how many done attempts may wait for the writer: past it
	// the destinations' workers wait (back-pressure) instead of piling up
	// unacknowledged messages.
	logQueue = 2048
	// logPatience is how long the writer retries a batch Postgres refuses
	// before it acknowledges the messages anyway (a delivery is not held
	// back for its log row) and keeps the rows to write later.
	logPatience = 5 * time.Second
	// logKeep bounds the rows kept for later while Postgres refuses them;
	// past it the oldest are dropped and counted (LogDropped).
	logKeep = 20000
)

// logWriter writes done attempts to intake.dispatch_attempts in batches,
// then acks, naks or terminates their messages: a message is acknowledged
// after its row is in the log.
type logWriter struct {
	st       *store.Store
	in       chan entry
	log      *slog.Logger
	m        *telemetry.DispatcherMetrics
	unlogged []store.DispatchAttempt // refused rows, written with the next batch
	rows     []store.DispatchAttempt // a batch's rows, reused batch after batch
}

func newLogWriter(st *store.Store, log *slog.Logger, m *telemetry.DispatcherMetrics) *logWriter {
	return &logWriter{st: st, in: make(chan entry, logQueue), log: log, m: m}
}

// run writes until in is closed and drained.
func (w *logWriter) run() {
	batch := make([]entry, 0, logBatch)
	linger := time.NewTimer(logLinger)
	for e := range w.in {
		batch = append(batch[:0], e)
		linger.Reset(logLinger)
		open := w.fill(&batch, linger.C)
		w.write(batch)
		for _, e := range batch {
			finish(e)
		}
		if !open {
			break
		}
	}
	if len(w.unlogged) > 0 {
		w.write(nil) // one last try for the rows kept
	}
}

// fill adds to batch what waits in w.in, up to logBatch; below logFill
// it waits for more until linger fires. It reports false when w.in is
// closed and drained.
func (w *logWriter) fill(batch *[]entry, linger <-chan time.Time) bool {
	for len(*batch) < logBatch {
		select {
		case e, ok := <-w.in:
			if !ok {
				return false
			}
			*batch = append(*batch, e)
			continue
		default:
		}
		if len(*batch) >= logFill {
			return true
		}
		select {
		case e, ok := <-w.in:
			if !ok {
				return false
			}
			*batch = append(*batch, e)
		case <-linger:
			return true
		}
	}
	return true
}

// finish tells JetStream what became of the attempt.
func finish(e entry) {
	switch e.row.Outcome {
	case store.DispatchDelivered:
		_ = e.msg.Ack()
	case store.DispatchRetry:
		_ = e.msg.NakWithDelay(e.wait)
	default:
		_ = e.msg.TermWithReason("delivery failed: " + e.row.ErrorClass)
	}
}

// write inserts the batch's rows (and any kept from before), retrying for
// logPatience; rows it could not write are kept, within logKeep.
func (w *logWriter) write(batch []entry) {
	// Already refused: one try, so an outage of Postgres costs each batch
	// one round trip, not logPatience.
	patience := logPatience
	if len(w.unlogged) > 0 {
		patience = 0
	}
	rows := w.unlogged
	w.unlogged = nil
	if rows == nil {
		rows = w.rows[:0] // pgx is done with the last batch's: CopyFrom returned
	}
	for _, e := range batch {
		rows = append(rows, e.row)
	}
	if len(rows) == 0 {
		return
	}
	defer func() {
		// Written: the slice serves the next batch, unless an outage grew
		// it past what a batch needs.
		if w.unlogged == nil && cap(rows) <= 2*logBatch {
			clear(rows) // the strings the rows hold go with them
			w.rows = rows[:0]
		}
	}()
	deadline := time.Now().Add(patience)
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), max(patience, time.Second))
		err := w.st.RecordDispatchAttempts(ctx, rows)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if drop := len(rows) - logKeep; drop > 0 {
				clear(rows[:drop])
				rows = rows[drop:]
				w.m.LogDropped.Add(float64(drop))
			}
			if patience > 0 { // the first refusal of a spell
				w.log.Error("delivery log: Postgres refuses the attempts' rows; acknowledging the messages anyway and keeping the rows to write later",
					"rows", len(rows), "err", err)
			}
			w.unlogged = rows
			return
		}
		time.Sleep(logBackoff.Next(attempt))
	}
}

var logBackoff = backoff.Backoff{Min: 100 * time.Millisecond, Max: time.Second}
