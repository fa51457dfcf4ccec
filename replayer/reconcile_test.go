package replayer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/intakehq/intake/replayer"
)

// TestReconcileSpanBoundsOpenRanges: a range open at its end is bounded by
// the stream's last sequence, a time range by the messages the scan reads;
// either over ReconcileMaxSpan is refused, inside it is checked.
func TestReconcileSpanBoundsOpenRanges(t *testing.T) {
	t.Parallel()
	r := setup(t)
	seqs := r.publish("evt_1", "evt_2", "evt_3", "evt_4", "evt_5")
	rp, _ := r.newReplayer(replayer.Options{ReconcileMaxSpan: 3})
	ctx := context.Background()
	hourAgo := time.Now().Add(-time.Hour)
	for _, req := range []replayer.ReconcileRequest{
		{FromSeq: seqs[0]},
		{FromSeq: seqs[0], ToSeq: seqs[3]},
		{Since: hourAgo},
		{Since: hourAgo, Until: time.Now().Add(time.Minute)},
		{Since: hourAgo, FromSeq: seqs[0]},
	} {
		if _, err := rp.Reconcile(ctx, req); !errors.Is(err, replayer.ErrSpanTooLarge) {
			t.Errorf("%+v: err = %v, want ErrSpanTooLarge", req, err)
		}
	}
	for _, req := range []replayer.ReconcileRequest{
		{FromSeq: seqs[2]},                 // 3..5
		{FromSeq: seqs[1], ToSeq: seqs[3]}, // 2..4
		{Since: hourAgo, FromSeq: seqs[2]}, // 3 messages scanned
		{FromSeq: seqs[0], ToSeq: seqs[2]}, // 1..3
	} {
		res, err := rp.Reconcile(ctx, req)
		if err != nil || res.Checked != 3 {
			t.Errorf("%+v: checked %d, err %v; want 3 checked", req, res.Checked, err)
		}
	}
}
