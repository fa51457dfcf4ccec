package replayer_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/intakehq/intake/pkg/envelope"
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

// TestDryRunPredictsTheReplayGuard: a range replay of a key without an
// inbox row whose body and type the guard holds under another key predicts
// would_refuse_replayed_body (the processor would refuse the copy), not
// would_apply; the same body as another type, or admitted by key, would
// apply. No processor runs: the guard's record is written as the processor
// writes it.
func TestDryRunPredictsTheReplayGuard(t *testing.T) {
	t.Parallel()
	r := setup(t)
	rp, _ := r.newReplayer(replayer.Options{})
	ctx := context.Background()
	seqs := r.publish("evt_copy")
	if _, err := r.db.Exec(ctx, `INSERT INTO intake.body_type_hashes (integration, payload_sha256, event_type, account, event_id)
		VALUES ('demo', $1, 'invoice.paid', 'main', 'evt_orig'), ('demo', $2, 'invoice.paid', 'main', 'evt_other')`,
		envelope.PayloadSHA256(body("evt_copy")), envelope.PayloadSHA256(body("evt_other"))); err != nil {
		t.Fatal(err)
	}
	dry := true
	rng := &apiclient.SeqRange{From: seqs[0], To: seqs[0]}
	for _, c := range []struct {
		name string
		req  apiclient.ReplayRequest
		want string
	}{
		{"a range", apiclient.ReplayRequest{Selector: apiclient.Selector{StreamSeq: rng}}, replayer.WouldRefuseReplayedBody},
		{"keys and a range, admitting", apiclient.ReplayRequest{Selector: apiclient.Selector{StreamSeq: rng,
			Keys: keysOf("evt_copy")}, AdmitReplayedBodies: true}, replayer.WouldApply},
	} {
		c.req.DryRun = &dry
		rep, err := rp.Replay(ctx, "ops", c.req)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Matched != 1 || rep.Outcomes[c.want] != 1 {
			t.Errorf("%s: outcomes %v, want %s", c.name, rep.Outcomes, c.want)
		}
	}
	if _, err := r.db.Exec(ctx, `UPDATE intake.body_type_hashes SET event_type = 'invoice.created' WHERE event_id = 'evt_orig'`); err != nil {
		t.Fatal(err)
	}
	rep, err := rp.Replay(ctx, "ops", apiclient.ReplayRequest{Selector: apiclient.Selector{StreamSeq: rng}, DryRun: &dry})
	if err != nil || rep.Outcomes[replayer.WouldApply] != 1 {
		t.Errorf("the body held as another type: outcomes %v, %v; want %s", rep.Outcomes, err, replayer.WouldApply)
	}
}

// TestDryRunNamesKeysThatNameNoEvent (issue 34 item 7): a dry run by keys
// with no inbox row and no refusal record — nothing to replay by key —
// says which, instead of only counting them missing; a key whose message
// is gone is missing, not unknown.
func TestDryRunNamesKeysThatNameNoEvent(t *testing.T) {
	t.Parallel()
	r := setup(t)
	rp, _ := r.newReplayer(replayer.Options{})
	ctx := context.Background()
	dry := true
	rep, err := rp.Replay(ctx, "ops", apiclient.ReplayRequest{Selector: apiclient.Selector{
		Keys: []string{"demo/main/evt_typo", "demo/other/evt_1"}}, DryRun: &dry})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Matched != 2 || rep.Outcomes[replayer.Missing] != 2 ||
		strings.Join(rep.UnknownKeys, " ") != "demo/main/evt_typo demo/other/evt_1" {
		t.Errorf("dry run of unknown keys: matched %d, outcomes %v, unknown %v", rep.Matched, rep.Outcomes, rep.UnknownKeys)
	}
}
