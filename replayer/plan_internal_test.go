package replayer

import (
	"context"
	"slices"
	"testing"

	"github.com/intakehq/intake/internal/harness/inboxcases"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

// TestPredict runs the inbox decision table through predict, the dry run's
// call of inbox.Decide (dryrun_test.go runs it through the API).
func TestPredict(t *testing.T) {
	for _, c := range inboxcases.Cases {
		if c.DryRun == "" {
			continue // no replay copy: nothing to predict
		}
		row, found, msg := c.Inputs()
		st := store.InboxState{PayloadSHA256: row.PayloadSHA256, StreamSeq: row.StreamSeq, Status: row.Status}
		if got := predict(c.Replay, st, found, msg.PayloadSHA256); got != c.DryRun {
			t.Errorf("%s: predict = %s, want %s", c.Name, got, c.DryRun)
		}
	}
}

func TestChoosePrefersTheInboxRowsMessage(t *testing.T) {
	row := store.InboxState{StreamSeq: 7, PayloadSHA256: "aa"}
	tests := []struct {
		name   string
		cands  []candidate
		row    store.InboxState
		hasRow bool
		want   uint64
	}{
		{"the row's own", []candidate{{3, "bb", false}, {7, "aa", false}, {9, "aa", true}}, row, true, 7},
		{"same payload, original", []candidate{{3, "bb", false}, {9, "aa", true}, {11, "aa", false}}, row, true, 11},
		{"an original over a copy", []candidate{{9, "aa", true}, {12, "cc", false}}, row, true, 12},
		{"no row: first original", []candidate{{2, "aa", true}, {4, "aa", false}, {5, "aa", false}}, store.InboxState{}, false, 4},
		{"only copies: the first", []candidate{{2, "aa", true}, {4, "aa", true}}, store.InboxState{}, false, 2},
	}
	for _, tt := range tests {
		if got := choose(tt.cands, tt.row, tt.hasRow); got.seq != tt.want {
			t.Errorf("%s: chose %d, want %d", tt.name, got.seq, tt.want)
		}
	}
}

func TestSummaryRepresentsEveryOutcomeInTheSample(t *testing.T) {
	p := &plan{}
	add := func(id, outcome string, n int) {
		for i := range n {
			p.add(store.ReplayItem{Key: envelope.Key{Integration: "demo", Account: "main", EventID: id + string(rune('a'+i))},
				Tenant: "acme", EventType: "x", Outcome: outcome})
		}
	}
	add("dedup", WouldDeduplicate, 20)
	add("retry", WouldRetry, 1)
	add("gone", Missing, 2)
	outcomes, counts, sample := p.summary()
	if outcomes[WouldDeduplicate] != 20 || outcomes[WouldRetry] != 1 || outcomes[Missing] != 2 || len(counts) != 3 {
		t.Fatalf("outcomes %v counts %v", outcomes, counts)
	}
	if len(sample) != sampleSize || !slices.Contains(sample, "demo/main/retrya") || !slices.Contains(sample, "demo/main/gonea") {
		t.Fatalf("sample %v: want %d keys with every outcome represented", sample, sampleSize)
	}
	for i, it := range p.items {
		if it.Pos != i {
			t.Fatalf("item %d has pos %d", i, it.Pos)
		}
	}
}

func TestPacerSpacesPublishes(t *testing.T) {
	p := newPacer(1) // one per second
	if err := p.wait(context.Background()); err != nil {
		t.Fatalf("first slot: %v", err)
	}
	first := p.next
	// The second slot is a second away: with a cancelled context the pacer
	// gives up instead of letting it through.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.wait(ctx); err == nil {
		t.Fatal("second publish within the same second was let through")
	}
	if p.next != first {
		t.Fatalf("a refused slot moved the schedule: %v -> %v", first, p.next)
	}
}
