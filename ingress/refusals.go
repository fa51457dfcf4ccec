package ingress

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake/pkg/envelope"
)

// refusals counts the requests ingress refused, by integration, status code
// and reason, between two flushes (Service.Run): the overview's and
// `intake status`'s "refused" figures (envelope.RefusalSummary). Its memory
// is bounded as rejectLog's: integrations come from the config, reasons and
// codes are ingress's own constants.
type refusals struct {
	mu     sync.Mutex
	start  time.Time
	counts map[refusalKey]int64
}

type refusalKey struct {
	integration string
	code        int
	reason      string
}

func (r *refusals) add(integration string, code int, reason string, now time.Time) {
	r.mu.Lock()
	if r.counts == nil {
		r.counts, r.start = map[refusalKey]int64{}, now
	}
	r.counts[refusalKey{integration, code, reason}]++
	r.mu.Unlock()
}

// take returns what was counted since the last take, by integration, and
// when that window began.
func (r *refusals) take() (time.Time, map[refusalKey]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start, counts := r.start, r.counts
	r.counts = nil
	return start, counts
}

// giveBack returns counts a flush could not send to the next window.
func (r *refusals) giveBack(start time.Time, counts map[refusalKey]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[refusalKey]int64{}
	}
	if r.start.IsZero() || start.Before(r.start) {
		r.start = start
	}
	for k, n := range counts {
		r.counts[k] += n
	}
}

// Run sends the refusal summaries every envelope.RefusalFlushInterval
// until ctx ends, then once more (the HTTP server has stopped by then: see
// intake.App.Stop), and returns nil. A summary NATS does not take (ingress
// does not buffer while disconnected) is kept for the next flush.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(envelope.RefusalFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.flushRefusals()
			return nil
		case <-t.C:
			s.flushRefusals()
		}
	}
}

// flushRefusals sends one summary per integration with refusals counted.
func (s *Service) flushRefusals() {
	start, counts := s.refusals.take()
	if len(counts) == 0 {
		return
	}
	end := s.now()
	by := map[string][]envelope.RefusalCount{}
	for k, n := range counts {
		by[k.integration] = append(by[k.integration], envelope.RefusalCount{StatusCode: k.code, Reason: k.reason, Count: n})
	}
	unsent := map[refusalKey]int64{}
	for name, cs := range by {
		sort.Slice(cs, func(i, j int) bool {
			if cs[i].StatusCode != cs[j].StatusCode {
				return cs[i].StatusCode < cs[j].StatusCode
			}
			return cs[i].Reason < cs[j].Reason
		})
		b, err := envelope.MarshalRefusalSummary(envelope.RefusalSummary{ID: uuid.NewString(), Integration: name,
			Instance: s.instance, WindowStart: start.UTC(), WindowEnd: end.UTC(), Counts: cs})
		if err == nil {
			msg := nats.NewMsg(envelope.SubjectReceipt(name))
			msg.Header.Set(envelope.HeaderReceiptKind, envelope.ReceiptKindRefusals)
			msg.Data = b
			err = s.js.Conn().PublishMsg(msg)
		}
		if err != nil {
			s.log.Debug("refusal summary not sent; kept for the next", "integration", name, "err", err)
			for _, c := range cs {
				unsent[refusalKey{name, c.StatusCode, c.Reason}] = c.Count
			}
		}
	}
	if len(unsent) > 0 {
		s.refusals.giveBack(start, unsent)
	}
}
