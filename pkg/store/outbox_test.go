package store_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func open(t *testing.T) *store.Store {
	t.Helper()
	ctx := context.Background()
	dbURL := testenv.Postgres(t)
	if err := store.Migrate(ctx, dbURL, nil); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, dbURL, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

func writeOutbox(t *testing.T, st *store.Store, ids ...string) {
	t.Helper()
	var w store.BatchWrites
	for _, id := range ids {
		k := envelope.Key{Integration: "demo", Account: "main", EventID: id}
		w.Outbox = append(w.Outbox, store.OutboxRow{Key: k, Subject: "intake.out.t.demo.x",
			Headers: map[string][]string{envelope.HeaderKey: {k.String()}}, Payload: []byte(`{"id":"` + id + `"}`)})
	}
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error { return w.Flush(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
}

// claim runs one relay claim of rows pending for any time; publishFailed
// ids go back with Unpublish.
func claim(t *testing.T, st *store.Store, limit int, publishFailed bool) []store.OutboxRow {
	t.Helper()
	return claimOlder(t, st, limit, 0, publishFailed)
}

func claimOlder(t *testing.T, st *store.Store, limit int, olderThan time.Duration, publishFailed bool) []store.OutboxRow {
	t.Helper()
	ctx := context.Background()
	var rows []store.OutboxRow
	err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		var err error
		if rows, err = store.ClaimOutbox(ctx, tx, limit, olderThan); err != nil || !publishFailed {
			return err
		}
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		return store.Unpublish(ctx, tx, ids, "no PubAck within 10s")
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// The relay claims rows pending longer than its delay, oldest first, and
// never rewrites them; the processor's marks take published rows off the
// list; a failed publish puts rows back with the reason; retention deletes
// only published rows, however old the pending ones are.
func TestOutboxPendingClaimAndRetention(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	writeOutbox(t, st, "e1", "e2")
	writeOutbox(t, st, "e3")
	writeOutbox(t, st, "marked")

	if n, _, err := st.OutboxLag(ctx); err != nil || n != 4 {
		t.Fatalf("lag = %d, %v; want 4 pending", n, err)
	}
	if got := claimOlder(t, st, 10, time.Hour, false); len(got) != 0 {
		t.Fatalf("claim of rows pending over an hour = %+v; want none yet", got)
	}
	var markedID string
	if err := st.Pool().QueryRow(ctx, `SELECT id::text FROM intake.outbox WHERE event_id = 'marked'`).Scan(&markedID); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkPublished(ctx, []string{markedID}); err != nil {
		t.Fatal(err)
	}
	if n, _, err := st.OutboxLag(ctx); err != nil || n != 3 {
		t.Fatalf("lag after marking = %d, %v; want 3 pending", n, err)
	}
	got := claim(t, st, 2, false)
	if len(got) != 2 || got[0].Key.EventID != "e1" || got[1].Key.EventID != "e2" || string(got[1].Payload) != `{"id":"e2"}` {
		t.Fatalf("first claim = %+v; want e1, e2 in insertion order with headers and payload", got)
	}
	// Each row its own headers: the COPY reuses one buffer for them, and
	// relies on pgx encoding a row before it asks for the next.
	for _, r := range got {
		if h := r.Headers[envelope.HeaderKey]; len(h) != 1 || h[0] != "demo/main/"+r.Key.EventID {
			t.Fatalf("%s's headers = %v; want its own key", r.Key.EventID, r.Headers)
		}
	}

	// e3's publish fails: it stays pending, with the reason.
	if got := claim(t, st, 10, true); len(got) != 1 || got[0].Key.EventID != "e3" {
		t.Fatalf("second claim = %+v; want e3 alone", got)
	}
	var attempts int
	var lastErr string
	if err := st.Pool().QueryRow(ctx, `SELECT attempts, last_error FROM intake.outbox WHERE event_id = 'e3'`).Scan(&attempts, &lastErr); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || lastErr != "no PubAck within 10s" {
		t.Fatalf("e3 attempts=%d last_error=%q; want 1 and the publish error", attempts, lastErr)
	}

	// Everything is now 100 hours old; retention at 72h keeps pending e3.
	if _, err := st.Pool().Exec(ctx, `UPDATE intake.outbox SET created_at = now() - interval '100 hours';
		UPDATE intake.outbox_pending SET created_at = now() - interval '100 hours'`); err != nil {
		t.Fatal(err)
	}
	n, age, err := st.OutboxLag(ctx)
	if err != nil || n != 1 || age < 99*time.Hour {
		t.Fatalf("lag = %d, %s, %v; want e3 pending for 100h", n, age, err)
	}
	// Retention drops whole days. The published rows move into the first
	// daily partition (the one after outbox_legacy, whose bound the
	// migration set); the clock is then two days past it.
	var first time.Time
	if err := st.Pool().QueryRow(ctx, `SELECT until FROM intake.outbox_partitions() WHERE part = 'intake.outbox_legacy'::regclass`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE intake.outbox SET created_at = $1 WHERE event_id <> 'e3'`, first.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	at := first.Add(48*time.Hour + 72*time.Hour)
	if _, err := st.AddOutboxPartitions(ctx, at); err != nil {
		t.Fatal(err)
	}
	until, err := st.OutboxPartitionsUntil(ctx)
	if err != nil || until.Before(at.Add(store.OutboxDaysAhead*24*time.Hour)) {
		t.Fatalf("partitions until %s, %v; want at least %d days after %s", until, err, store.OutboxDaysAhead, at)
	}
	would, err := st.DropOutboxPartitions(ctx, at.Add(-72*time.Hour), true)
	if err != nil || len(would) != 2 {
		t.Fatalf("dry run: %+v, %v; want two days", would, err)
	}
	dropped, err := st.DropOutboxPartitions(ctx, at.Add(-72*time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	firstDay := "intake.outbox_p" + first.UTC().Format("20060102")
	var names []string
	for _, d := range dropped {
		names = append(names, d.Name)
	}
	if len(dropped) != 2 || names[0] != firstDay || dropped[0] != would[0] {
		t.Fatalf("dropped %v; want %s (the published rows) and the empty day after it, not outbox_legacy (pending e3)", names, firstDay)
	}
	var left int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM intake.outbox`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("%d outbox rows left, %v; want pending e3 alone", left, err)
	}
	if again, err := st.DropOutboxPartitions(ctx, at.Add(-72*time.Hour), false); err != nil || len(again) != 0 {
		t.Fatalf("a second pass dropped %v, %v; want nothing", again, err)
	}
	if got := claim(t, st, 10, false); len(got) != 1 || got[0].Key.EventID != "e3" {
		t.Fatalf("claim after retention = %+v; want pending e3 kept", got)
	}
	if n, _, err := st.OutboxLag(ctx); err != nil || n != 0 {
		t.Fatalf("lag = %d, %v; want nothing pending", n, err)
	}
	if got := claim(t, st, 10, false); len(got) != 0 {
		t.Fatalf("claim of an empty pending list = %+v", got)
	}
	// e3 published: its partition goes at the next pass.
	dropped, err = st.DropOutboxPartitions(ctx, at.Add(-72*time.Hour), false)
	if err != nil || len(dropped) != 1 || dropped[0].Name != "intake.outbox_legacy" {
		t.Fatalf("dropped %+v, %v; want outbox_legacy once e3 was published", dropped, err)
	}
}

// A mark never waits for a relay: ids the relay holds are skipped (the relay
// finishes them), the others leave the pending list at once.
func TestMarkSkipsRowsARelayHolds(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	writeOutbox(t, st, "held", "free")
	ids := map[string]string{}
	rows, err := st.Pool().Query(ctx, `SELECT event_id, id::text FROM intake.outbox`)
	if err != nil {
		t.Fatal(err)
	}
	var k, id string
	if _, err := pgx.ForEachRow(rows, []any{&k, &id}, func() error { ids[k] = id; return nil }); err != nil {
		t.Fatal(err)
	}

	relay, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Rollback(ctx)
	if _, err := relay.Exec(ctx, `SELECT 1 FROM intake.outbox_pending WHERE id = $1 FOR UPDATE`, ids["held"]); err != nil {
		t.Fatal(err)
	}
	// A deadline only to fail instead of hanging if the mark waited.
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := st.MarkPublished(mctx, []string{ids["held"], ids["free"]}); err != nil {
		t.Fatalf("mark while a relay holds a row: %v", err)
	}
	var pending []string
	rows, err = st.Pool().Query(ctx, `SELECT o.event_id FROM intake.outbox_pending p JOIN intake.outbox o USING (id)`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&k}, func() error { pending = append(pending, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0] != "held" {
		t.Fatalf("pending after the mark = %v; want only the row the relay holds", pending)
	}
}

// A row's msg_id comes back from the relay's claim and from GetOutboxRow; a
// row written without one (as before migration 00009) comes back with its
// id in MsgID, the Nats-Msg-Id it always published under.
func TestOutboxMsgIDIsStoredAndDefaultsToTheID(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	with := envelope.Key{Integration: "demo", Account: "main", EventID: "with"}
	msgID := envelope.OutboxMsgID(with, inbox.ModeOriginal, "", 0)
	w := store.BatchWrites{Outbox: []store.OutboxRow{
		{Key: with, MsgID: msgID, Subject: "intake.out.t.demo.x", Payload: []byte(`{}`)},
		{Key: envelope.Key{Integration: "demo", Account: "main", EventID: "without"}, Subject: "intake.out.t.demo.x", Payload: []byte(`{}`)},
	}}
	if err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error { return w.Flush(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
	got := claim(t, st, 10, false)
	if len(got) != 2 || got[0].MsgID != msgID || got[0].NatsMsgID() != msgID || got[1].MsgID != got[1].ID || got[1].ID != w.Outbox[1].ID {
		t.Fatalf("claimed %+v; want %q's msg id %s, and %q's id as its msg id", got, "with", msgID, "without")
	}
	for i, r := range w.Outbox {
		row, err := st.GetOutboxRow(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if row.MsgID != got[i].MsgID {
			t.Errorf("GetOutboxRow(%s).MsgID = %q, want %q", r.ID, row.MsgID, got[i].MsgID)
		}
	}
	var stored *string
	if err := st.Pool().QueryRow(ctx, `SELECT msg_id FROM intake.outbox WHERE event_id = 'without'`).Scan(&stored); err != nil || stored != nil {
		t.Fatalf("msg_id of a row written without one = %v, %v; want NULL", stored, err)
	}
}

// A row whose payload INTAKE_IN holds is written without it: NULL payload,
// its sequence kept, and read back so (the relay and a redelivery read the
// body from the stream); a row with its own payload keeps it, an empty one
// included.
func TestOutboxPayloadLeftInTheStream(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	key := func(id string) envelope.Key { return envelope.Key{Integration: "demo", Account: "main", EventID: id} }
	w := store.BatchWrites{Outbox: []store.OutboxRow{
		{Key: key("ref"), Subject: "intake.out.t.demo.x", Payload: []byte(`{"in":"memory"}`), PayloadSeq: 42},
		{Key: key("copy"), Subject: "intake.out.t.demo.x", Payload: []byte(`{"own":1}`)},
		{Key: key("empty"), Subject: "intake.out.t.demo.x"},
	}}
	if err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error { return w.Flush(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
	var stored [][]byte
	rows, err := st.Pool().Query(ctx, `SELECT payload FROM intake.outbox ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p []byte
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, p)
	}
	if rows.Err() != nil || len(stored) != 3 || stored[0] != nil || string(stored[1]) != `{"own":1}` || stored[2] == nil || len(stored[2]) != 0 {
		t.Fatalf("stored payloads %q (%v); want NULL, the row's own, and empty (not NULL)", stored, rows.Err())
	}

	want := []struct {
		seq     uint64
		payload string
	}{{42, ""}, {0, `{"own":1}`}, {0, ""}}
	got := claim(t, st, 10, false)
	if len(got) != 3 {
		t.Fatalf("claimed %d rows, want 3", len(got))
	}
	for i, r := range got {
		row, err := st.GetOutboxRow(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, read := range []store.OutboxRow{r, row} {
			if read.PayloadSeq != want[i].seq || string(read.Payload) != want[i].payload || (want[i].seq != 0) != (read.Payload == nil) {
				t.Errorf("%s: read payload %q, sequence %d; want %q, %d", read.Key, read.Payload, read.PayloadSeq, want[i].payload, want[i].seq)
			}
		}
	}
}

// A row stores none of the headers it gives back — the key's four, which
// its columns hold, and, when its payload is INTAKE_IN's, the payload
// hash that message carries — and reading it puts them back, so the
// relay and a redelivery publish the headers the processor did. A value
// that is not the row's own (a handler's) is stored as it is.
func TestOutboxRowLeavesOutWhatItGivesBack(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	key := func(id string) envelope.Key { return envelope.Key{Integration: "demo", Account: "main", EventID: id} }
	identity := func(k envelope.Key, extra ...string) map[string][]string {
		h := map[string][]string{envelope.HeaderKey: {k.String()}, envelope.HeaderIntegration: {k.Integration},
			envelope.HeaderAccount: {k.Account}, envelope.HeaderEventID: {k.EventID}, envelope.HeaderTenant: {"acme"},
			envelope.HeaderEventType: {"thing.happened"}, envelope.HeaderPayloadSHA256: {"ab12"},
			envelope.HeaderReceivedAt: {"2026-12-06T02:00:00Z"}, envelope.HeaderExecutionID: {"exec-" + k.EventID}}
		for i := 0; i+1 < len(extra); i += 2 {
			h[extra[i]] = []string{extra[i+1]}
		}
		return h
	}
	inStream, own, handlers := key("in-stream"), key("own"), key("handlers")
	w := store.BatchWrites{Outbox: []store.OutboxRow{
		{Key: inStream, Subject: "intake.out.acme.demo.x", Headers: identity(inStream), Payload: []byte(`{}`), PayloadSeq: 7},
		{Key: own, Subject: "intake.out.acme.demo.x", Headers: identity(own), Payload: []byte(`{"own":1}`)},
		// A handler's values for two of them: another event's id, and an
		// integration the row is not.
		{Key: handlers, Subject: "intake.out.acme.demo.x", Headers: identity(handlers,
			envelope.HeaderEventID, "upstream-42", envelope.HeaderIntegration, "billing"), Payload: []byte(`{"h":1}`)},
	}}
	if err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error { return w.Flush(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
	stored := map[string]map[string][]string{}
	rows, err := st.Pool().Query(ctx, `SELECT event_id, headers FROM intake.outbox`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var h map[string][]string
		if err := rows.Scan(&id, &h); err != nil {
			t.Fatal(err)
		}
		stored[id] = h
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	kept := []string{envelope.HeaderTenant, envelope.HeaderEventType, envelope.HeaderReceivedAt, envelope.HeaderExecutionID}
	wantStored := map[string][]string{
		"in-stream": kept,
		"own":       append([]string{envelope.HeaderPayloadSHA256}, kept...),
		"handlers":  append([]string{envelope.HeaderPayloadSHA256, envelope.HeaderEventID, envelope.HeaderIntegration}, kept...),
	}
	for id, names := range wantStored {
		h := stored[id]
		if len(h) != len(names) {
			t.Errorf("%s: stored headers %v; want only %v", id, h, names)
			continue
		}
		for _, n := range names {
			if _, ok := h[n]; !ok {
				t.Errorf("%s: stored headers %v lack %s", id, h, n)
			}
		}
	}
	if v := stored["handlers"][envelope.HeaderEventID]; len(v) != 1 || v[0] != "upstream-42" {
		t.Errorf("the handler's %s is stored as %v; want upstream-42", envelope.HeaderEventID, v)
	}

	got := claim(t, st, 10, false)
	if len(got) != 3 {
		t.Fatalf("claimed %d rows, want 3", len(got))
	}
	for _, r := range got {
		row, err := st.GetOutboxRow(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, read := range []store.OutboxRow{r, row} {
			want := w.Outbox[0].Headers
			switch read.Key {
			case own:
				want = w.Outbox[1].Headers
			case handlers:
				want = w.Outbox[2].Headers
			}
			if read.PayloadSeq != 0 {
				if _, ok := read.Headers[envelope.HeaderPayloadSHA256]; ok {
					t.Errorf("%s: read with its payload still in the stream, it already has a payload hash", read.Key)
				}
				read.SetStreamPayload([]byte(`{}`), "ab12")
			}
			if !reflect.DeepEqual(read.Headers, want) {
				t.Errorf("%s: read back with headers %v; want what was written, %v", read.Key, read.Headers, want)
			}
		}
	}
}
