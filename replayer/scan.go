package replayer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/replayer/apiclient"
)

// scanned is one message of a stream scan: headers only, never the body.
type scanned struct {
	Seq     uint64
	Time    time.Time
	Subject string
	Header  nats.Header
}

// scanRange bounds a scan: sequences From..To (To 0: the stream's last
// sequence when the scan starts) and message times Since ≤ t < Until, on
// Subjects (all when empty).
type scanRange struct {
	From, To     uint64
	Since, Until time.Time
	Subjects     []string
}

// newScanRange is a selector's stream range; nil bounds are open.
func newScanRange(seq *apiclient.SeqRange, since, until *time.Time) scanRange {
	var rg scanRange
	if seq != nil {
		rg.From, rg.To = seq.From, seq.To
	}
	if since != nil {
		rg.Since = *since
	}
	if until != nil {
		rg.Until = *until
	}
	return rg
}

// errStopScan ends a scan early without an error.
var errStopScan = errors.New("stop scan")

// scanStream calls fn for every message of the range in stream order,
// through an ephemeral, headers-only consumer without acks that is deleted
// afterwards. It returns the last sequence of the stream when the scan
// started: everything up to it was seen (or is outside the range).
func scanStream(ctx context.Context, js jetstream.JetStream, name string, rg scanRange, fn func(scanned) error) (uint64, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", name, err)
	}
	st := s.CachedInfo().State
	end := st.LastSeq
	if rg.To != 0 && rg.To < end {
		end = rg.To
	}
	if st.Msgs == 0 || rg.From > end {
		return st.LastSeq, nil
	}
	cfg := jetstream.ConsumerConfig{
		Description:       "Intake replayer scan",
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       true,
		MemoryStorage:     true,
		InactiveThreshold: time.Minute, // cleaned up even if we die mid-scan
		FilterSubjects:    rg.Subjects,
	}
	switch {
	case rg.From > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, rg.From
	case !rg.Since.IsZero():
		since := rg.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	default:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	cons, err := s.CreateConsumer(ctx, cfg)
	if err != nil {
		return 0, fmt.Errorf("stream %s: scan consumer: %w", name, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()
	if cons.CachedInfo().NumPending == 0 {
		return st.LastSeq, nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return 0, fmt.Errorf("stream %s: scan: %w", name, err)
		}
		got := 0
		done := false
		for m := range batch.Messages() {
			if done {
				continue // drain the batch
			}
			got++
			meta, err := m.Metadata()
			if err != nil {
				return 0, fmt.Errorf("stream %s: scan: %w", name, err)
			}
			seq := meta.Sequence.Stream
			if seq > end || (!rg.Until.IsZero() && !meta.Timestamp.Before(rg.Until)) {
				done = true
				continue
			}
			if rg.Since.IsZero() || !meta.Timestamp.Before(rg.Since) {
				err := fn(scanned{Seq: seq, Time: meta.Timestamp, Subject: m.Subject(), Header: m.Headers()})
				if errors.Is(err, errStopScan) {
					done = true
					continue
				}
				if err != nil {
					return 0, err
				}
			}
			if meta.NumPending == 0 || seq == end {
				done = true
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("stream %s: scan: %w", name, err)
		}
		if done || got == 0 {
			return st.LastSeq, nil
		}
	}
}

// lastSeq is the stream's last sequence now.
func lastSeq(ctx context.Context, js jetstream.JetStream, name string) (uint64, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", name, err)
	}
	return s.CachedInfo().State.LastSeq, nil
}
