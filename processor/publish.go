package processor

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

// pubAckTimeout bounds the wait for INTAKE_OUT's PubAcks.
const pubAckTimeout = 10 * time.Second

// publishRows sends outbox rows to INTAKE_OUT asynchronously, Nats-Msg-Id =
// the row id, and waits for every PubAck. It returns the ids acknowledged,
// the ids not acknowledged and the first error. Publishing a row twice is
// harmless: INTAKE_OUT's duplicate window drops the copy.
func publishRows(ctx context.Context, js jetstream.JetStream, rows []store.OutboxRow) (ok, failed []string, firstErr error) {
	futures := make([]jetstream.PubAckFuture, len(rows))
	for i, row := range rows {
		h := nats.Header{}
		for k, v := range row.Headers {
			h[k] = v
		}
		h.Set(envelope.HeaderMsgID, row.ID)
		f, err := js.PublishMsgAsync(&nats.Msg{Subject: row.Subject, Header: h, Data: row.Payload})
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("publish outbox %s: %w", row.ID, err)
			}
			continue
		}
		futures[i] = f
	}
	timeout := time.After(pubAckTimeout)
	ok = make([]string, 0, len(rows))
	for i, f := range futures {
		if f == nil {
			failed = append(failed, rows[i].ID)
			continue
		}
		select {
		case <-f.Ok():
			ok = append(ok, rows[i].ID)
		case err := <-f.Err():
			failed = append(failed, rows[i].ID)
			if firstErr == nil {
				firstErr = fmt.Errorf("publish outbox %s: %w", rows[i].ID, err)
			}
		case <-timeout:
			failed = append(failed, rows[i].ID)
			if firstErr == nil {
				firstErr = fmt.Errorf("publish outbox %s: no PubAck within %s", rows[i].ID, pubAckTimeout)
			}
		case <-ctx.Done():
			failed = append(failed, rows[i].ID)
			if firstErr == nil {
				firstErr = ctx.Err()
			}
		}
	}
	return ok, failed, firstErr
}

// marker takes the ids the processor published off the pending list, many
// batches' worth per statement.
type marker struct {
	store *store.Store
	log   *slog.Logger
	in    chan []string
	done  chan struct{}
}

// markEvery is how long published ids wait to be marked; markMax marks at
// once.
const (
	markEvery = 50 * time.Millisecond
	markMax   = 4096
)

func newMarker(st *store.Store, log *slog.Logger) *marker {
	m := &marker{store: st, log: log, in: make(chan []string, 64), done: make(chan struct{})}
	go m.run()
	return m
}

// add queues published ids; it blocks while the marker is far behind.
func (m *marker) add(ids []string) {
	if len(ids) > 0 {
		m.in <- ids
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
			// They stay pending: the relay publishes them again under the
			// same Nats-Msg-Id, and INTAKE_OUT's duplicate window drops them.
			m.log.Warn("marking published outbox rows failed; the relay will republish them", "rows", len(ids), "err", err)
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
