package replayer

import (
	"context"

	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// Results says what became of a replay's copies, beside the outcomes its
// plan predicted: the store reads the processor's records for each item
// (store.ReplayResults), judged against the processor consumer's ack floor
// now. A dry run publishes nothing and a redelivery's copies go to
// subscribers, not through the inbox: both have no results (nil). Nor has a
// replay still running or awaiting approval: the read visits every item, and
// a CLI following a large replay reads it every second.
func (r *Replayer) Results(ctx context.Context, rep store.Replay) (*apiclient.ReplayResults, error) {
	if rep.DryRun || (rep.Mode != string(inbox.ReplayExact) && rep.Mode != string(inbox.ReplayReexecute)) ||
		rep.State == store.ReplayRunning || rep.State == store.ReplayAwaitingApproval {
		return nil, nil
	}
	floor, err := r.ackFloor(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := r.o.Store.ReplayResults(ctx, rep.ID, rep.Mode, floor)
	if err != nil {
		return nil, err
	}
	res := &apiclient.ReplayResults{Counts: map[string]int64{}, ByPrediction: make([]apiclient.ResultCount, len(rows)), Settled: floor}
	for i, c := range rows {
		res.Counts[c.Result] += c.Count
		res.ByPrediction[i] = apiclient.ResultCount(c)
	}
	return res, nil
}
