package replayer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/intakehq/intake/replayer/apiclient"
)

// scanned is one message of a stream scan: headers only, and the body only
// for a scan that asks for it (scanRange.Bodies: the payload search).
type scanned struct {
	Seq     uint64
	Time    time.Time
	Subject string
	Header  nats.Header
	Body    []byte
}

// scanRange bounds a scan: sequences From..To (To 0: the stream's last
// sequence when the scan starts) and message times Since ≤ t < Until, on
// Subjects (all when empty).
type scanRange struct {
	From, To     uint64
	Since, Until time.Time
	Subjects     []string
	// Bodies: the messages' bodies too (every other scan reads headers
	// only, and never a payload).
	Bodies bool
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

// ScanSlots is how many scan consumers the replayers of a deployment (every
// pod and every shard's, on one NATS account) hold at once on each stream.
// A scan takes a free slot, waiting while all are taken. Their names are
// fixed so that the shipped NATS permissions can list them: a permission
// subject cannot match part of a token, so "replayer-scan-*" is not
// expressible, and the replayer's user may create, pull from and delete
// exactly these consumers and no subscriber's or processor's durable.
const ScanSlots = 8

// ScanConsumerName is the name of scan slot i (0 ≤ i < ScanSlots):
// "replayer-scan-{i}". No other consumer may use these names.
func ScanConsumerName(i int) string { return fmt.Sprintf("replayer-scan-%d", i) }

// scanSlotWait is how long a scan waits before trying the slots again.
const scanSlotWait = 200 * time.Millisecond

// createScanConsumer creates cfg in a free scan slot. The slot is taken
// with JetStream's create action, which refuses an existing consumer of
// another config; the description's nonce makes every scan's config its
// own, so two scans never share a slot.
func createScanConsumer(ctx context.Context, s jetstream.Stream, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	cfg.Description = "Intake replayer scan " + nuid.Next()
	first := rand.IntN(ScanSlots)
	for {
		for i := range ScanSlots {
			cfg.Name = ScanConsumerName((first + i) % ScanSlots)
			cons, err := s.CreateConsumer(ctx, cfg)
			if errors.Is(err, jetstream.ErrConsumerExists) {
				continue
			}
			return cons, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("every scan slot (%d) is taken: %w", ScanSlots, ctx.Err())
		case <-time.After(scanSlotWait):
		}
	}
}

// scanInactiveThreshold is how long a scan consumer outlives its last
// pull: a replayer that dies mid-scan leaves its slot to the server, which
// deletes the consumer (it has a name but no Durable: an ephemeral) after
// this long, and the slot is free again.
const scanInactiveThreshold = time.Minute

// scanConfig is the scan consumer of rg: headers only, no acks, in memory,
// ephemeral (no Durable) with scanInactiveThreshold; createScanConsumer
// gives it a slot's name.
func scanConfig(rg scanRange) jetstream.ConsumerConfig {
	cfg := jetstream.ConsumerConfig{
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       !rg.Bodies,
		MemoryStorage:     true,
		InactiveThreshold: scanInactiveThreshold,
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
	return cfg
}

// scanStream calls fn for every message of the range in stream order,
// through a headers-only consumer without acks in a scan slot, deleted
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
	cons, err := createScanConsumer(ctx, s, scanConfig(rg))
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
				sc := scanned{Seq: seq, Time: meta.Timestamp, Subject: m.Subject(), Header: m.Headers()}
				if rg.Bodies {
					sc.Body = m.Data()
				}
				err := fn(sc)
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
