package replayer_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

const secondOperatorToken = "second-operator-token-0123456789"

// Issue 30: one operator token could re-execute up to a million events
// with no second pair of eyes. Above api.replays.reexecute_approval_above
// a re-execution is recorded awaiting approval and publishes nothing until
// another operator approves it; its requester cannot, and the approver is
// in the audit record.
func TestReexecuteAboveTheCeilingWaitsForASecondOperator(t *testing.T) {
	t.Parallel()
	cfg := strings.Replace(testConfig, "  tokens:\n", "  replays: {reexecute_approval_above: 2}\n  tokens:\n    - {name: ops2, token: "+secondOperatorToken+", role: operator}\n", 1)
	r := setupWith(t, testrig.Options{Config: cfg})
	r.start()
	ids := []string{"evt_a1", "evt_a2", "evt_a3"}
	r.publish(ids...)
	r.settled()
	before := r.count(`SELECT count(*) FROM effects`)
	ctx := context.Background()

	// At the ceiling: runs at once.
	small := r.replay(map[string]any{"selector": sel("keys", keysOf(ids[:2]...)), "mode": "reexecute", "reason": "two, by hand"})
	if small.Published != 2 || small.ApprovedBy != nil {
		t.Fatalf("a re-execution of 2 (the ceiling) = %+v, want published at once", small)
	}
	r.settled()

	// Above it: recorded, not published.
	var rep apiclient.Replay
	r.api(http.MethodPost, "/api/v1/replays", map[string]any{"selector": sel("keys", keysOf(ids...)), "mode": "reexecute",
		"reason": "all three", "dry_run": false}, http.StatusAccepted, &rep)
	if rep.State != apiclient.ReplayAwaitingApproval {
		t.Fatalf("a re-execution of 3 = %+v, want awaiting_approval", rep)
	}
	ops := apiclient.New(r.base, operatorToken, nil)
	// Another replay runs meanwhile: the replayer looks for running
	// replays when it starts one, and must not take this one.
	if exact := r.replay(map[string]any{"selector": sel("keys", keysOf(ids...)), "mode": "exact"}); exact.State != apiclient.ReplayDone {
		t.Fatalf("exact replay of 3 (exact replays never wait) = %+v", exact)
	}
	if got, _ := ops.Replay(ctx, rep.ID); got.State != apiclient.ReplayAwaitingApproval || got.Published != 0 {
		t.Fatalf("while awaiting approval: %+v, want nothing published", got)
	}
	if n := len(r.copies("INTAKE_IN", "Intake-Replay-Id", rep.ID)); n != 0 {
		t.Fatalf("%d copies published before approval", n)
	}

	// Its requester cannot approve it; a viewer cannot either.
	if code, b := r.do(http.MethodPost, "/api/v1/replays/"+rep.ID+"/approve", operatorToken, nil); code != http.StatusForbidden {
		t.Fatalf("approval by the requester = %d %s, want 403", code, b)
	}
	if code, b := r.do(http.MethodPost, "/api/v1/replays/"+rep.ID+"/approve", viewerToken, nil); code != http.StatusForbidden {
		t.Fatalf("approval by a viewer = %d %s, want 403", code, b)
	}
	// Another operator can.
	approved, err := apiclient.New(r.base, secondOperatorToken, nil).ApproveReplay(ctx, rep.ID)
	if err != nil || approved.State != apiclient.ReplayRunning || approved.ApprovedBy == nil || *approved.ApprovedBy != "ops2" || approved.ApprovedAt == nil {
		t.Fatalf("approval by ops2 = %+v, %v", approved, err)
	}
	done := r.waitReplay(rep.ID, store.ReplayDone)
	if done.Published != 3 || done.RequestedBy != "ops" || *done.ApprovedBy != "ops2" {
		t.Fatalf("approved replay = %+v", done)
	}
	r.settled()
	if got := r.count(`SELECT count(*) FROM effects WHERE replay_id = $1`, rep.ID); got != 3 {
		t.Fatalf("%d re-executions under the approved replay, want 3", got)
	}
	if got := r.count(`SELECT count(*) FROM effects`); got != before+2+3 {
		t.Fatalf("%d effects, want %d", got, before+5)
	}
	// Approved once: a second approval is a conflict.
	if code, b := r.do(http.MethodPost, "/api/v1/replays/"+rep.ID+"/approve", secondOperatorToken, nil); code != http.StatusConflict {
		t.Fatalf("second approval = %d %s, want 409", code, b)
	}

	// One awaiting approval can be cancelled, and then never runs.
	var dropped apiclient.Replay
	r.api(http.MethodPost, "/api/v1/replays", map[string]any{"selector": sel("keys", keysOf(ids...)), "mode": "reexecute",
		"reason": "again", "dry_run": false}, http.StatusAccepted, &dropped)
	if c, err := ops.CancelReplay(ctx, dropped.ID); err != nil || c.State != apiclient.ReplayCancelled {
		t.Fatalf("cancel awaiting = %+v, %v", c, err)
	}
	if code, _ := r.do(http.MethodPost, "/api/v1/replays/"+dropped.ID+"/approve", secondOperatorToken, nil); code != http.StatusConflict {
		t.Fatalf("approving a cancelled replay = %d, want 409", code)
	}
	// A dry run of it never waits: it publishes nothing anyway.
	var dry apiclient.Replay
	r.api(http.MethodPost, "/api/v1/replays", map[string]any{"selector": sel("keys", keysOf(ids...)), "mode": "reexecute",
		"reason": "look first", "dry_run": true}, http.StatusOK, &dry)
	if dry.State != apiclient.ReplayDone {
		t.Fatalf("dry run = %+v", dry)
	}
}
