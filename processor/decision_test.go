package processor_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/inboxcases"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

var allOutcomes = []inbox.Outcome{inbox.New, inbox.Duplicate, inbox.Redelivered, inbox.Conflict, inbox.Stale,
	inbox.Replayed, inbox.Retried, inbox.Reexecuted}

// TestProcessorDecidesAsTheTable runs every case of the inbox decision
// table through a real processor: the inbox row is put in the case's state,
// the case's message (with its replay headers) published, and the outcome
// read from the outcome metric, the effects, executions, conflicts and the
// row's status.
func TestProcessorDecidesAsTheTable(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	ctx := context.Background()
	cases := inboxcases.Cases
	for i, c := range cases {
		ack, err := r.js.PublishMsg(ctx, c.Msg(i, true))
		if err != nil {
			t.Fatal(err)
		}
		rowSeq := ack.Sequence + 1_000_000 // the row's own message is another one
		if c.RowsMessage {
			rowSeq = ack.Sequence
		}
		if err := c.Seed(ctx, r.db, i, rowSeq); err != nil {
			t.Fatal(err)
		}
		if err := c.SeedReplay(ctx, r.db, i, ack.Sequence); err != nil {
			t.Fatal(err)
		}
	}

	// Each case has an integration of its own.
	var integrations []config.Integration
	for i := range cases {
		integrations = append(integrations, config.Integration{Name: inboxcases.Key(i).Integration, Tenant: "acme"})
	}
	m := telemetry.NewMetrics()
	r.run(processor.Options{Metrics: m, Integrations: integrations})
	decided := func(i int) map[inbox.Outcome]float64 {
		got := map[inbox.Outcome]float64{}
		for _, o := range allOutcomes {
			if n := testutil.ToFloat64(m.Processed.WithLabelValues(inboxcases.Key(i).Integration, o.String())); n > 0 {
				got[o] = n
			}
		}
		return got
	}
	testenv.Eventually(t, 60*time.Second, func() bool {
		for i := range cases {
			if len(decided(i)) == 0 {
				return false
			}
		}
		return true
	}, "the processor never decided every case")

	for i, c := range cases {
		k := inboxcases.Key(i).String()
		if got := decided(i); len(got) != 1 || got[c.Want.Outcome] != 1 {
			t.Errorf("%s: outcomes %v, want one %s", c.Name, got, c.Want.Outcome)
		}
		runs := 0
		if c.Want.Run {
			runs = 1
		}
		if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, k); n != runs {
			t.Errorf("%s: %d effects, want %d", c.Name, n, runs)
		}
		if n := r.count(`SELECT count(*) FROM intake.executions WHERE integration || '/' || account || '/' || event_id = $1
			AND mode = $2`, k, string(c.Want.Mode)); n != runs {
			t.Errorf("%s: %d executions in mode %q, want %d", c.Name, n, c.Want.Mode, runs)
		}
		conflicts := 0
		if c.Want.Outcome == inbox.Conflict {
			conflicts = 1
		}
		if n := r.count(`SELECT count(*) FROM intake.conflicts WHERE integration || '/' || account || '/' || event_id = $1`, k); n != conflicts {
			t.Errorf("%s: %d conflicts recorded, want %d", c.Name, n, conflicts)
		}
		// A first application, or a run that settles a failed or
		// quarantined row, leaves it processed; nothing else changes its
		// status.
		want := c.Row
		if c.Want.Outcome == inbox.New || c.Want.Settles {
			want = inbox.StatusProcessed
		}
		var status inbox.Status
		if err := r.db.QueryRow(ctx, `SELECT status FROM intake.inbox WHERE integration || '/' || account || '/' || event_id = $1`,
			k).Scan(&status); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if status != want {
			t.Errorf("%s: inbox status %s, want %s", c.Name, status, want)
		}
	}
}
