package envelope

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/intakehq/intake/pkg/inbox"
)

// An output's id depends on the event's key, its position and, for a
// re-execution only, the replay; it is a version 5 UUID, the one
// uuid.NewSHA1 makes of the same name.
func TestOutboxMsgID(t *testing.T) {
	k := Key{Integration: "stripe-live", Account: "acct_1", EventID: "evt_1"}
	base := OutboxMsgID(k, inbox.ModeOriginal, "", 0)

	same := []struct {
		name     string
		k        Key
		mode     inbox.Mode
		replayID string
	}{
		{"again", k, inbox.ModeOriginal, ""},
		{"a retry: the first effective execution too", k, inbox.ModeRetry, "r1"},
		{"an exact replay that finds no row", k, inbox.ModeOriginal, "r1"},
	}
	for _, c := range same {
		if got := OutboxMsgID(c.k, c.mode, c.replayID, 0); got != base {
			t.Errorf("%s: id %s, want %s", c.name, got, base)
		}
	}

	differ := []struct {
		name     string
		k        Key
		mode     inbox.Mode
		replayID string
		pos      int
	}{
		{"next position", k, inbox.ModeOriginal, "", 1},
		{"other event", Key{Integration: "stripe-live", Account: "acct_1", EventID: "evt_2"}, inbox.ModeOriginal, "", 0},
		{"other account", Key{Integration: "stripe-live", Account: "acct_2", EventID: "evt_1"}, inbox.ModeOriginal, "", 0},
		{"other integration", Key{Integration: "stripe-test", Account: "acct_1", EventID: "evt_1"}, inbox.ModeOriginal, "", 0},
		{"fields split elsewhere", Key{Integration: "stripe-live", Account: "acct_1/evt_1", EventID: ""}, inbox.ModeOriginal, "", 0},
		{"fields split elsewhere, other way", Key{Integration: "stripe-live/acct_1", Account: "", EventID: "evt_1"}, inbox.ModeOriginal, "", 0},
		{"re-execution", k, inbox.ModeReexecute, "r1", 0},
		{"re-execution without a replay id", k, inbox.ModeReexecute, "", 0},
	}
	seen := map[string]string{base: "base"}
	for _, c := range differ {
		got := OutboxMsgID(c.k, c.mode, c.replayID, c.pos)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s: id %s, the same as %s's", c.name, got, prev)
		}
		seen[got] = c.name
	}
	if OutboxMsgID(k, inbox.ModeReexecute, "r1", 0) == OutboxMsgID(k, inbox.ModeReexecute, "r2", 0) {
		t.Error("two replays' re-executions share an id")
	}
	if OutboxMsgID(k, inbox.ModeReexecute, "r1", 2) != OutboxMsgID(k, inbox.ModeReexecute, "r1", 2) {
		t.Error("a re-execution run again changes its ids")
	}

	long := Key{Integration: "github", Account: "", EventID: strings.Repeat("x", 1000)}
	for id, name := range seen {
		checkV5(t, name, id)
	}
	checkV5(t, "long key", OutboxMsgID(long, inbox.ModeOriginal, "", 0))
	want := uuid.NewSHA1(outboxNamespace, outboxName(nil, k, inbox.ModeReexecute, "r1", 3)).String()
	if got := OutboxMsgID(k, inbox.ModeReexecute, "r1", 3); got != want {
		t.Errorf("id %s, uuid.NewSHA1 of the same name %s", got, want)
	}
	want = uuid.NewSHA1(outboxNamespace, outboxName(nil, long, inbox.ModeOriginal, "", 0)).String()
	if got := OutboxMsgID(long, inbox.ModeOriginal, "", 0); got != want {
		t.Errorf("long key: id %s, uuid.NewSHA1 of the same name %s", got, want)
	}
}

func checkV5(t *testing.T, name, id string) {
	t.Helper()
	u, err := uuid.Parse(id)
	if err != nil {
		t.Errorf("%s: %q is not a UUID: %v", name, id, err)
		return
	}
	if u.Version() != 5 || u.Variant() != uuid.RFC4122 || u.String() != id {
		t.Errorf("%s: %s is version %d, variant %s; want a canonical version 5 RFC 4122 UUID", name, id, u.Version(), u.Variant())
	}
}

// BenchmarkOutboxMsgID: one per outbox row on the processor's path; the
// id's string is its only allocation.
func BenchmarkOutboxMsgID(b *testing.B) {
	k := Key{Integration: "stripe-live", Account: "acct_1", EventID: "evt_1NcVfd2eZvKYlo2C3vXb3tPq"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = OutboxMsgID(k, inbox.ModeOriginal, "", i&7)
	}
}

// TestMsgIDSchemesArePinned: each scheme's id for a fixed input, as the
// code wrote it before the schemes moved here. An id is on the wire (and in
// replay records, and in subscribers' dedup tables): changing one makes a
// stream or a subscriber take a repeat for a new message.
func TestMsgIDSchemesArePinned(t *testing.T) {
	k := Key{Integration: "stripe-live", Account: "acct_1", EventID: "evt_1"}
	for _, c := range []struct{ scheme, got, want string }{
		{"delivery", DeliveryMsgID(k, PayloadSHA256([]byte(`{"a":1}`))), "stripe-live/acct_1/evt_1#015abd7f5cc57a2d"},
		{"delivery, short hash", DeliveryMsgID(k, "abc"), "stripe-live/acct_1/evt_1#abc"},
		{"replay", ReplayMsgID("0190a6f2-replay", k), "replay:0190a6f2-replay:stripe-live/acct_1/evt_1"},
		{"replay, '/' in the event id", ReplayMsgID("r1", Key{Integration: "demo", Account: "main", EventID: "evt/1"}), "replay:r1:demo/main/evt/1"},
		{"redelivery", RedeliveryMsgID("0190a6f2-redelivery", "4b1c2a57-0d8e-5f3a-9b6c-1e2d3f4a5b6c"),
			"redeliver:0190a6f2-redelivery:4b1c2a57-0d8e-5f3a-9b6c-1e2d3f4a5b6c"},
		{"redelivery of a message without an id", RedeliveryMsgID("r2", SeqMsgID(42)), "redeliver:r2:seq:42"},
		{"outbox", OutboxMsgID(k, inbox.ModeOriginal, "", 0), "428c300f-d642-54ac-8792-80f68febae5f"},
		{"outbox, next position", OutboxMsgID(k, inbox.ModeOriginal, "", 1), "e6d93ce1-32bc-5cfd-89c0-4e06c73be312"},
		{"outbox, re-execution", OutboxMsgID(k, inbox.ModeReexecute, "0190a6f2-replay", 2), "b129911b-360e-5c41-a231-38507568f03a"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.scheme, c.got, c.want)
		}
	}
}
