package replayer_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/intakehq/intake/internal/harness/inboxcases"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

// TestDryRunPredictsAsTheTable puts every replay case of the inbox decision
// table into a real inbox and stream — the event's message in INTAKE_IN,
// its inbox row in the case's state — and asks POST /api/v1/replays for dry
// runs: each event's prediction must be the table's. No processor runs, so
// nothing changes the rows. Each case has an integration of its own, so a
// dry run's counts (by integration and outcome) give every case's
// prediction.
func TestDryRunPredictsAsTheTable(t *testing.T) {
	t.Parallel()
	r := setup(t)
	rp, _ := r.newReplayer(replayer.Options{})
	mux := chi.NewRouter()
	rp.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.base = srv.URL
	ctx := context.Background()

	type entry struct {
		i   int
		c   inboxcases.Case
		seq uint64 // the case's message in INTAKE_IN
	}
	byMode := map[inbox.ReplayMode][]entry{}
	for i, c := range inboxcases.Cases {
		if c.DryRun == "" {
			continue // no replay copy: nothing for a dry run to predict
		}
		// The message a replay copies is in the stream as ingress wrote it.
		ack, err := r.js.PublishMsg(ctx, c.Msg(i, false))
		if err != nil {
			t.Fatal(err)
		}
		rowSeq := ack.Sequence // the message is the row's own
		if c.OtherPayload {
			rowSeq += 1_000_000 // the row's own message (another payload) is elsewhere
		}
		if err := c.Seed(ctx, r.db, i, rowSeq); err != nil {
			t.Fatal(err)
		}
		byMode[c.Replay] = append(byMode[c.Replay], entry{i, c, ack.Sequence})
	}
	if len(byMode[inbox.ReplayExact]) == 0 || len(byMode[inbox.ReplayReexecute]) == 0 {
		t.Fatal("the table lacks exact or reexecute replay cases")
	}

	// predicted runs a dry run and returns its prediction by integration.
	predicted := func(how string, mode inbox.ReplayMode, selector map[string]any, want int) map[string]string {
		t.Helper()
		var rep apiclient.Replay
		r.api(http.MethodPost, "/api/v1/replays", map[string]any{"selector": selector, "mode": mode,
			"reason": "what would happen", "dry_run": true}, http.StatusOK, &rep)
		if !rep.DryRun || rep.Matched != int64(want) {
			t.Fatalf("%s %s: dry run %+v, want %d events predicted", mode, how, rep, want)
		}
		out := map[string]string{}
		for _, n := range rep.Counts {
			if n.Count != 1 || out[n.Integration] != "" {
				t.Fatalf("%s %s: counts %+v, want one event per integration", mode, how, rep.Counts)
			}
			out[n.Integration] = n.Outcome
		}
		return out
	}
	for mode, entries := range byMode {
		// By stream range: the message found in INTAKE_IN is the copy's source.
		var keys, ownKeys []string
		from, to := entries[0].seq, entries[0].seq
		for _, e := range entries {
			keys = append(keys, inboxcases.Key(e.i).String())
			from, to = min(from, e.seq), max(to, e.seq)
			// By key alone the replayer finds the row's own message: the
			// case's message when there is a row with the same payload.
			if e.c.Row != inboxcases.NoRow && !e.c.OtherPayload {
				ownKeys = append(ownKeys, inboxcases.Key(e.i).String())
			}
		}
		got := predicted("by stream range", mode, map[string]any{"keys": keys,
			"stream_seq": map[string]any{"from": from, "to": to}}, len(keys))
		gotByKey := predicted("by key", mode, map[string]any{"keys": ownKeys}, len(ownKeys))
		for _, e := range entries {
			integ := inboxcases.Key(e.i).Integration
			if got[integ] != e.c.DryRun {
				t.Errorf("%s: by stream range, dry run predicts %q, want %s", e.c.Name, got[integ], e.c.DryRun)
			}
			if p, ok := gotByKey[integ]; ok && p != e.c.DryRun {
				t.Errorf("%s: by key, dry run predicts %q, want %s", e.c.Name, p, e.c.DryRun)
			}
		}
	}
}
