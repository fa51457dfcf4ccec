package replayer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/replayer/apiclient"
)

// A 2xx from ingress means INTAKE_IN acknowledged the message. Intake never
// deletes a message inside INTAKE_IN's range (limits retention ages them
// out at the head; a full stream refuses new ones), so a hole inside the
// range, or inbox rows past the stream's last sequence (a store restored
// from an older copy, writes lost to a crash), is a loss of acknowledged
// events: CheckGaps finds both, Run checks every GapCheckInterval, and each
// check sets intake_stream_gap_messages and logs at error while a gap
// stands, so a loss is seen within minutes. A third sign comes from the
// other side: a delivery receipt whose answer was "duplicate" proves the
// stream held the event's message; if that message is settled (older than
// the one at the processor's ack floor) and the event has neither an inbox
// row nor a rejection, the message vanished before the processor saw it.

// receiptWindow is how far back the gap check reads receipts; receiptSkew
// allows for ingress's clock (received_at) running ahead of the
// nats-server's (stored times).
const (
	receiptWindow = time.Hour
	receiptSkew   = time.Minute
)

// receiptGaps fills the receipt half of a gap check.
func (r *Replayer) receiptGaps(ctx context.Context, s jetstream.Stream, g *apiclient.Gaps) error {
	floor, err := r.ackFloor(ctx)
	if err != nil || floor == 0 || floor < g.FirstSeq {
		return err // nothing settled yet, or the floor aged out of the stream
	}
	m, err := s.GetMsg(ctx, floor)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil // deleted: the deleted count reports it
		}
		return fmt.Errorf("stream %s: message %d: %w", envelope.StreamIn, floor, err)
	}
	until := m.Time.Add(-receiptSkew)
	n, keys, err := r.o.Store.ReceiptsWithoutEvent(ctx, g.CheckedAt.Add(-receiptWindow), until, gapSample)
	if err != nil {
		return err
	}
	g.ReceiptsWithoutEvent = uint64(n)
	for _, k := range keys {
		if r.mine(k.Integration) {
			g.ReceiptsSample = append(g.ReceiptsSample, k.String())
		}
	}
	return nil
}

const gapSample = 100

// CheckGaps checks INTAKE_IN against itself and the inbox, and records the
// result in the gap metric.
func (r *Replayer) CheckGaps(ctx context.Context) (apiclient.Gaps, error) {
	s, err := r.o.JS.Stream(ctx, envelope.StreamIn)
	if err != nil {
		return apiclient.Gaps{}, fmt.Errorf("stream %s: %w", envelope.StreamIn, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return apiclient.Gaps{}, fmt.Errorf("stream %s: info: %w", envelope.StreamIn, err)
	}
	g := apiclient.Gaps{CheckedAt: time.Now().UTC(), Stream: envelope.StreamIn, FirstSeq: info.State.FirstSeq,
		LastSeq: info.State.LastSeq, Deleted: uint64(info.State.NumDeleted)}
	if g.Deleted > 0 && g.Deleted <= 10*gapSample { // the details only while they are few
		if detailed, err := s.Info(ctx, jetstream.WithDeletedDetails(true)); err == nil {
			d := detailed.State.Deleted
			g.DeletedSample = d[:min(len(d), gapSample)]
		}
	}
	if g.InboxMaxSeq, err = r.o.Store.MaxInboxStreamSeq(ctx); err != nil {
		return apiclient.Gaps{}, err
	}
	if g.InboxMaxSeq > g.LastSeq {
		g.RolledBack = g.InboxMaxSeq - g.LastSeq
	}
	if err := r.receiptGaps(ctx, s, &g); err != nil {
		return apiclient.Gaps{}, err
	}
	r.metrics.gaps.WithLabelValues(g.Stream, "deleted").Set(float64(g.Deleted))
	r.metrics.gaps.WithLabelValues(g.Stream, "rolled_back").Set(float64(g.RolledBack))
	r.metrics.gaps.WithLabelValues(g.Stream, "receipt_without_event").Set(float64(g.ReceiptsWithoutEvent))
	return g, nil
}

// watchGaps runs CheckGaps at start and every GapCheckInterval until ctx
// ends, logging a standing gap at error each time.
func (r *Replayer) watchGaps(ctx context.Context) {
	tick := time.NewTicker(r.o.GapCheckInterval)
	defer tick.Stop()
	for {
		g, err := r.CheckGaps(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			r.o.Log.Warn("gap check failed", "err", err)
		case err == nil && g.Found():
			r.o.Log.Error("acknowledged messages are missing from the stream: run `intake reconcile` over the range and "+
				"look for lost events (see README, Guarantees)", "stream", g.Stream, "deleted", g.Deleted,
				"deleted_sample", g.DeletedSample, "rolled_back", g.RolledBack, "last_seq", g.LastSeq, "inbox_max_seq", g.InboxMaxSeq,
				"receipts_without_event", g.ReceiptsWithoutEvent, "receipts_sample", g.ReceiptsSample)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// gaps is GET /api/v1/gaps: a check now.
func (r *Replayer) gaps(w http.ResponseWriter, req *http.Request) {
	g, err := r.CheckGaps(req.Context())
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, g)
}
