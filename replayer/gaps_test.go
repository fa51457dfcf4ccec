package replayer_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

// TestGapsBehindIntakesBackAreReported is issue 20's acceptance: messages
// removed from INTAKE_IN behind Intake's back, and a stream that lost its
// tail (as a restored older copy of the store would), are reported by the
// next check — the API, the metric and an error log — not found at a
// customer's complaint.
func TestGapsBehindIntakesBackAreReported(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	r.publish("evt_1", "evt_2", "evt_3", "evt_4", "evt_5")
	r.settled()

	var g apiclient.Gaps
	r.api("GET", "/api/v1/gaps", nil, 200, &g)
	if g.Found() || g.LastSeq != 5 || g.InboxMaxSeq != 5 {
		t.Fatalf("a whole stream: %+v, want no gap at last seq 5", g)
	}

	// Behind Intake's back: two acknowledged messages vanish.
	ctx := context.Background()
	s, err := r.js.Stream(ctx, envelope.StreamIn)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{2, 4} {
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	r.api("GET", "/api/v1/gaps", nil, 200, &g)
	if g.Deleted != 2 || !slices.Equal(g.DeletedSample, []uint64{2, 4}) {
		t.Fatalf("after deleting 2 and 4: %+v", g)
	}

	// The stream's tail lost (the inbox saw sequences the stream no longer
	// has): an inbox row claims a sequence past the stream's last.
	if _, err := r.db.Exec(ctx, `UPDATE intake.inbox SET stream_seq = 8 WHERE event_id = 'evt_5'`); err != nil {
		t.Fatal(err)
	}
	r.api("GET", "/api/v1/gaps", nil, 200, &g)
	if g.RolledBack != 3 || g.InboxMaxSeq != 8 {
		t.Fatalf("inbox past the stream's last sequence: %+v, want 3 rolled back", g)
	}

	// The periodic pass finds it by itself, sets the metric and logs it.
	reg := prometheus.NewRegistry()
	logs := &testenv.Buffer{}
	rp, _ := r.newReplayer(replayer.Options{GapCheckInterval: 100 * time.Millisecond, Registry: reg,
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	r.runReplayer(rp)
	testenv.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "acknowledged messages are missing from the stream")
	}, "the periodic check logged no gap")
	if n, err := testutil.GatherAndCount(reg, "intake_stream_gap_messages"); err != nil || n != 3 {
		t.Fatalf("gap gauges: %d, %v", n, err)
	}
	want := `
# HELP intake_stream_gap_messages Acknowledged messages missing from a stream at the last gap check, by kind (deleted: inside the stream's range; rolled_back: past its last sequence, which the inbox has seen; receipt_without_event: events a duplicate receipt proves were stored, settled with no inbox row or rejection).
# TYPE intake_stream_gap_messages gauge
intake_stream_gap_messages{kind="deleted",stream="INTAKE_IN"} 2
intake_stream_gap_messages{kind="receipt_without_event",stream="INTAKE_IN"} 0
intake_stream_gap_messages{kind="rolled_back",stream="INTAKE_IN"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "intake_stream_gap_messages"); err != nil {
		t.Fatal(err)
	}
}

// TestReceiptsWithoutEventAreReported: a delivery receipt answered
// "duplicate" proves INTAKE_IN held the event's message; once everything
// stored before it is settled, an event with neither an inbox row nor a
// rejection lost its message before the processor saw it (a store restored
// from an older copy that also reused its sequences leaves no other trace).
func TestReceiptsWithoutEventAreReported(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	r.publish("evt_1")
	r.settled()
	ctx := context.Background()
	receipt := func(id string, age time.Duration) {
		t.Helper()
		if _, err := r.db.Exec(ctx, `INSERT INTO intake.deliveries (receipt_id, integration, account, event_id, received_at,
			instance, status_code, answer) VALUES ($1, $2, $3, $4, $5, 'ingress-test', 200, 'duplicate')`,
			"r-"+id, key(id).Integration, key(id).Account, id, time.Now().Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	receipt("evt_1", 5*time.Minute)    // its event is in the inbox
	receipt("evt_gone", 5*time.Minute) // its message vanished
	receipt("evt_late", 0)             // newer than the settled messages: not judged yet

	var g apiclient.Gaps
	r.api("GET", "/api/v1/gaps", nil, 200, &g)
	if g.ReceiptsWithoutEvent != 1 || !slices.Equal(g.ReceiptsSample, []string{key("evt_gone").String()}) || !g.Found() {
		t.Fatalf("gaps: %+v, want evt_gone alone", g)
	}
}
