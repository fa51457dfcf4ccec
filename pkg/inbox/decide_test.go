package inbox_test

import (
	"testing"

	"github.com/intakehq/intake/internal/harness/inboxcases"
	"github.com/intakehq/intake/pkg/inbox"
)

func TestDecide(t *testing.T) {
	for _, c := range inboxcases.Cases {
		t.Run(c.Name, func(t *testing.T) {
			if c.RowsMessage && (c.Row == inboxcases.NoRow || c.Replay != inbox.ReplayNone) {
				t.Fatal("bad case: only a delivery from ingress can be the row's own message")
			}
			if (c.DryRun != "") != (c.Replay != inbox.ReplayNone) {
				t.Fatal("bad case: a replay copy, and only one, has a dry-run prediction")
			}
			row, found, msg := c.Inputs()
			if got := inbox.Decide(row, found, msg); got != c.Want {
				t.Errorf("Decide(%+v, %v, %+v) = %+v, want %+v", row, found, msg, got, c.Want)
			}
			if c.Replay != inbox.ReplayNone && !c.Executed {
				// A dry run decides for a copy not yet published.
				msg.StreamSeq = inboxcases.NoSeq
				if got := inbox.Decide(row, found, msg); got != c.Want {
					t.Errorf("unpublished copy: Decide(%+v, %v, %+v) = %+v, want %+v", row, found, msg, got, c.Want)
				}
			}
		})
	}
}

func TestDecisionRunsInAModeOrNot(t *testing.T) {
	for _, c := range inboxcases.Cases {
		if c.Want.Run != (c.Want.Mode != "") {
			t.Errorf("%s: %+v: a decision has a mode exactly when the handler runs", c.Name, c.Want)
		}
	}
}

func TestOutcomeLabels(t *testing.T) {
	// The processor's outcome metric labels; dashboards and alerts use them.
	want := map[inbox.Outcome]string{
		inbox.New: "new", inbox.Duplicate: "duplicate", inbox.Redelivered: "redelivered", inbox.Conflict: "conflict",
		inbox.Stale: "stale", inbox.Replayed: "replayed", inbox.Retried: "retried", inbox.Reexecuted: "reexecuted",
	}
	for o, label := range want {
		if o.String() != label {
			t.Errorf("%d.String() = %q, want %q", o, o.String(), label)
		}
	}
	if got := inbox.Outcome(0).String(); got != "unknown" {
		t.Errorf("the zero Outcome is %q, want unknown", got)
	}
}

func TestReplayModeValid(t *testing.T) {
	for _, m := range []inbox.ReplayMode{inbox.ReplayNone, inbox.ReplayExact, inbox.ReplayReexecute} {
		if !m.Valid() {
			t.Errorf("%q not valid", m)
		}
	}
	if inbox.ReplayMode("redeliver").Valid() {
		t.Error("redeliver is a replay's mode, not a message's")
	}
}
