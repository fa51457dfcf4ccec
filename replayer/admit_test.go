package replayer_test

import (
	"context"
	"errors"
	"testing"

	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

// TestAdmissionNeedsKeysAndAnOperator: admit_replayed_bodies applies
// deliveries the replay guard refused, so it names them: a replay by range
// or status that asks for it is refused, and so is a re-drive's replay
// (requested_by redrive), whatever it selects — the re-drive runs
// unattended, and what the guard refused is never its to admit.
func TestAdmissionNeedsKeysAndAnOperator(t *testing.T) {
	t.Parallel()
	r := setup(t)
	rp, _ := r.newReplayer(replayer.Options{})
	ctx := context.Background()
	dry := true
	for _, c := range []struct {
		name, by string
		sel      apiclient.Selector
	}{
		{"a range", "ops", apiclient.Selector{StreamSeq: &apiclient.SeqRange{From: 1}}},
		{"a status", "ops", apiclient.Selector{Status: "failed"}},
		{"a re-drive", replayer.RedriveRequester, apiclient.Selector{Keys: []string{"demo/main/evt_1"}}},
	} {
		_, err := rp.Replay(ctx, c.by, apiclient.ReplayRequest{Selector: c.sel, DryRun: &dry, AdmitReplayedBodies: true})
		var re *replayer.RequestError
		if !errors.As(err, &re) {
			t.Errorf("%s admitting replayed bodies: %v, want a refused request", c.name, err)
		}
	}
	rep, err := rp.Replay(ctx, "ops", apiclient.ReplayRequest{Selector: apiclient.Selector{Keys: []string{"demo/main/evt_1"}},
		DryRun: &dry, AdmitReplayedBodies: true})
	if err != nil || !rep.AdmitReplayedBodies {
		t.Errorf("an operator's admission by key: %+v, %v; want it recorded", rep, err)
	}
}
