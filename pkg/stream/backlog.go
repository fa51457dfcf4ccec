package stream

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Backlog is what a consumer has not had acknowledged: messages not
// delivered yet, those delivered and waiting for their ack (a retry's wait
// included), and the stored time of the oldest of them.
type Backlog struct {
	Pending    uint64 // not delivered yet
	AckPending int    // delivered, not acknowledged
	Oldest     time.Time
}

// Waiting is every message of the backlog.
func (b Backlog) Waiting() uint64 { return b.Pending + uint64(max(b.AckPending, 0)) }

// maxOldestFilters bounds the message gets ConsumerBacklog makes for the
// oldest message: past it, the first message on any subject past the ack
// floor stands in (sequences follow stored time: an upper bound of the age).
const maxOldestFilters = 8

// ConsumerBacklog reads consumer's backlog on s: its info, then the first
// message past its ack floor that its filters match (one get per filter).
// Oldest is zero when nothing waits.
func ConsumerBacklog(ctx context.Context, s jetstream.Stream, consumer string) (Backlog, error) {
	c, err := s.Consumer(ctx, consumer)
	if err != nil {
		return Backlog{}, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return Backlog{}, err
	}
	b := Backlog{Pending: info.NumPending, AckPending: info.NumAckPending}
	if b.Waiting() == 0 {
		return b, nil
	}
	b.Oldest, err = OldestUnacked(ctx, s, info, maxOldestFilters)
	return b, err
}

// OldestUnacked returns the stored time of the first message past the
// consumer's ack floor that its filters match (info is its info; s its
// stream): one message get per filter, or, past maxFilters, one for the
// first message on any subject, whose age is an upper bound (sequences
// follow stored time). Zero when nothing past the floor matches.
func OldestUnacked(ctx context.Context, s jetstream.Stream, info *jetstream.ConsumerInfo, maxFilters int) (time.Time, error) {
	filters := info.Config.FilterSubjects
	if info.Config.FilterSubject != "" {
		filters = append(filters, info.Config.FilterSubject)
	}
	if len(filters) == 0 || len(filters) > maxFilters {
		filters = []string{">"}
	}
	var oldest time.Time
	for _, f := range filters {
		msg, err := s.GetMsg(ctx, info.AckFloor.Stream+1, jetstream.WithGetMsgSubject(f))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // nothing of this filter past the floor
		}
		if err != nil {
			return time.Time{}, err
		}
		if oldest.IsZero() || msg.Time.Before(oldest) {
			oldest = msg.Time
		}
	}
	return oldest, nil
}
