package replayer

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/testenv"
)

// scanSlotsStream is a stream on an embedded server, for the slot tests.
func scanSlotsStream(t *testing.T) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	srv := testenv.NATS(t)
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "SLOTS", Subjects: []string{"slots.>"}})
	if err != nil {
		t.Fatal(err)
	}
	return js, s
}

// consumerNames are the stream's consumers as the server lists them.
func consumerNames(t *testing.T, s jetstream.Stream) []string {
	t.Helper()
	var names []string
	l := s.ConsumerNames(context.Background())
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// TestScanSlotsAreFixedNamedEphemerals: scans take the slots
// replayer-scan-0..7 (the names the shipped NATS permissions list), as
// ephemerals with an inactive threshold; a ninth scan waits for a free
// slot and takes the one freed.
func TestScanSlotsAreFixedNamedEphemerals(t *testing.T) {
	_, s := scanSlotsStream(t)
	ctx := context.Background()
	var want []string
	for i := range ScanSlots {
		want = append(want, ScanConsumerName(i))
		cons, err := createScanConsumer(ctx, s, scanConfig(scanRange{}))
		if err != nil {
			t.Fatalf("scan %d: %v", i, err)
		}
		info := cons.CachedInfo()
		if info.Config.Durable != "" || info.Config.InactiveThreshold != scanInactiveThreshold {
			t.Errorf("scan consumer %s: durable %q, inactive threshold %s; want an ephemeral freed after %s",
				info.Name, info.Config.Durable, info.Config.InactiveThreshold, scanInactiveThreshold)
		}
	}
	slices.Sort(want)
	if got := consumerNames(t, s); !slices.Equal(got, want) {
		t.Fatalf("consumers %v, want the slots %v", got, want)
	}

	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := createScanConsumer(short, s, scanConfig(scanRange{})); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a ninth scan with every slot taken: %v, want it to wait until its context ends", err)
	}
	if err := s.DeleteConsumer(ctx, ScanConsumerName(3)); err != nil {
		t.Fatal(err)
	}
	cons, err := createScanConsumer(ctx, s, scanConfig(scanRange{}))
	if err != nil || cons.CachedInfo().Name != ScanConsumerName(3) {
		t.Fatalf("after slot 3 was freed: %v, %v; want slot 3", cons, err)
	}
}

// TestScanSlotOfADeadReplayerFreesItself: a scan consumer nobody pulls from
// (its replayer died mid-scan) is deleted by the server after its inactive
// threshold, and its slot is taken again. The threshold is shortened here;
// the replayer's is scanInactiveThreshold.
func TestScanSlotOfADeadReplayerFreesItself(t *testing.T) {
	_, s := scanSlotsStream(t)
	ctx := context.Background()
	for range ScanSlots {
		cfg := scanConfig(scanRange{})
		cfg.InactiveThreshold = 500 * time.Millisecond
		if _, err := createScanConsumer(ctx, s, cfg); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return len(consumerNames(t, s)) == 0 },
		"the abandoned scan consumers were never deleted")
	if _, err := createScanConsumer(ctx, s, scanConfig(scanRange{})); err != nil {
		t.Fatalf("a scan after the slots freed themselves: %v", err)
	}
}
