package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

// TestCheckReplayCopies: a copy is covered only by a recorded, published
// replay of its mode that selected its key under its Nats-Msg-Id, whose
// item is not missing and, once recorded, landed at the copy's sequence.
// A covered copy of a replay recorded with admit_replayed_bodies says so;
// no other copy does.
func TestCheckReplayCopies(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := context.Background()
	key := func(id string) envelope.Key { return envelope.Key{Integration: "demo", Account: "main", EventID: id} }
	msgID := func(replay, id string) string { return "replay:" + replay + ":" + key(id).String() }
	record := func(mode string, dry, admit bool, ids ...string) string {
		t.Helper()
		r := &store.Replay{ID: uuid.NewString(), RequestedBy: "ops", Selector: []byte(`{}`), Mode: mode, DryRun: dry,
			Rate: 10, State: store.ReplayRunning, AdmitReplayedBodies: admit}
		var items []store.ReplayItem
		if !dry {
			for i, id := range ids {
				items = append(items, store.ReplayItem{Pos: i, Key: key(id), Tenant: "acme", EventType: "x",
					StreamSeq: uint64(i + 1), MsgID: msgID(r.ID, id), Outcome: "would_apply"})
			}
		}
		if err := st.CreateReplay(ctx, r, items); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	exact := record("exact", false, false, "a", "gone", "landed")
	dry := record("reexecute", true, true, "a")
	admitting := record("exact", false, true, "a", "gone")
	if _, err := st.Pool().Exec(ctx, `UPDATE intake.replay_items SET state = 'missing' WHERE replay_id = $1 AND event_id = 'gone'`, exact); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE intake.replay_items SET state = 'published', published_seq = 70
		WHERE replay_id = $1 AND event_id = 'landed'`, exact); err != nil {
		t.Fatal(err)
	}
	copyOf := func(replay, mode, id string, seq uint64) store.ReplayCopy {
		return store.ReplayCopy{ReplayID: replay, Mode: mode, Key: key(id), MsgID: msgID(replay, id), StreamSeq: seq}
	}
	other := copyOf(exact, "exact", "a", 50)
	other.MsgID = "replay:" + exact + ":elsewhere"
	cases := []struct {
		name string
		c    store.ReplayCopy
		want string
	}{
		{"the replay's copy", copyOf(exact, "exact", "a", 50), ""},
		{"its copy where it landed", copyOf(exact, "exact", "landed", 70), ""},
		{"its copy published again elsewhere", copyOf(exact, "exact", "landed", 71), store.RejectReplayNotCovering},
		{"a key it did not select", copyOf(exact, "exact", "b", 51), store.RejectReplayNotCovering},
		{"another Nats-Msg-Id", other, store.RejectReplayNotCovering},
		{"an item found missing", copyOf(exact, "exact", "gone", 52), store.RejectReplayNotCovering},
		{"another mode", copyOf(exact, "reexecute", "a", 53), store.RejectUnknownReplay},
		{"a dry run", copyOf(dry, "reexecute", "a", 54), store.RejectUnknownReplay},
		{"an invented id", copyOf(uuid.NewString(), "reexecute", "a", 55), store.RejectUnknownReplay},
		{"not a uuid", copyOf("r1", "exact", "a", 56), store.RejectUnknownReplay},
		{"an admitting replay's copy", copyOf(admitting, "exact", "a", 57), ""},
		{"an admitting replay's key it did not select", copyOf(admitting, "exact", "b", 58), store.RejectReplayNotCovering},
	}
	copies := make([]store.ReplayCopy, len(cases))
	for i, c := range cases {
		copies[i] = c.c
	}
	err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		checks, err := store.CheckReplayCopies(ctx, tx, copies)
		if err != nil {
			return err
		}
		for i, c := range cases {
			if checks[i].Reason != c.want {
				t.Errorf("%s: %q (%s), want %q", c.name, checks[i].Reason, checks[i].Detail, c.want)
			}
			if want := c.c.ReplayID == admitting && c.want == ""; checks[i].AdmitReplayedBody != want {
				t.Errorf("%s: admit %v, want %v", c.name, checks[i].AdmitReplayedBody, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRejectionsRecordAnything: a rejected message is whatever someone
// published; its record never fails (invalid UTF-8, NUL) and is written once.
func TestRejectionsRecordAnything(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := context.Background()
	at := time.Now()
	bad := "ev\x00il\xff"
	r := store.Rejection{Integration: bad, Account: "main", EventID: "e", Tenant: bad, EventType: "x", PayloadSHA256: "0000",
		StreamSeq: 7, Subject: "intake.in.x.y", Reason: store.RejectUnknownIntegration, ReceivedAt: &at}
	for range 2 { // a redelivery after a lost Term
		w := store.BatchWrites{Rejections: []store.Rejection{r}}
		if err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error { return w.Flush(ctx, tx) }); err != nil {
			t.Fatal(err)
		}
	}
	list, next, err := st.ListRejections(ctx, store.RejectionFilter{Reason: store.RejectUnknownIntegration})
	if err != nil || len(list) != 1 || next != "" {
		t.Fatalf("rejections %+v, %q, %v; want one", list, next, err)
	}
	if list[0].Tenant != "ev\uFFFDil\uFFFD" || list[0].ReplayID != nil {
		t.Errorf("recorded %+v", list[0])
	}
	if _, _, err := st.ListRejections(ctx, store.RejectionFilter{Cursor: "nope"}); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("bad cursor: %v", err)
	}
}
