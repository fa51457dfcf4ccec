package processor_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

// twoOutputs is effects with a second outbox message, so positions count.
func twoOutputs() processor.Handler {
	h := effects()
	return processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		msgs, err := h.Handle(ctx, tx, ev)
		if err != nil {
			return nil, err
		}
		return append(msgs, processor.Message{Subject: envelope.SubjectOut(ev.Tenant, ev.Key.Integration, "thing.audited"),
			Header: processor.IdentityHeader(ev), Data: []byte("audit " + ev.Key.EventID)}), nil
	})
}

// outboxMsgIDs are the msg ids of id's outbox rows, in the order they were
// written.
func (r *rig) outboxMsgIDs(id string) []string {
	r.t.Helper()
	rows, err := r.db.Query(context.Background(), `SELECT coalesce(msg_id, '') FROM intake.outbox WHERE event_id = $1 ORDER BY seq`, id)
	if err != nil {
		r.t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		r.t.Fatal(err)
	}
	return ids
}

// outMsgIDs are the Nats-Msg-Ids INTAKE_OUT holds for key id, in stream
// order, and the number of messages the stream holds in all.
func (r *rig) outMsgIDs(id string) ([]string, uint64) {
	r.t.Helper()
	var ids []string
	for _, m := range r.tr.Messages(r.t, envelope.StreamOut) {
		if m.Header.Get(envelope.HeaderKey) == key(id).String() {
			ids = append(ids, m.Header.Get(envelope.HeaderMsgID))
		}
	}
	s, err := r.js.Stream(context.Background(), envelope.StreamOut)
	if err != nil {
		r.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return ids, info.State.Msgs
}

// A Postgres failover can lose a commit whose outbox messages were already
// published. The event is re-driven (an exact replay finds no inbox row and
// runs it as an original execution), and its outbox messages get the same
// Nats-Msg-Ids as before: INTAKE_OUT's duplicate window drops them, so
// subscribers see each message once. A re-execution is a new execution and
// publishes under new ids.
func TestLostCommitRunAgainPublishesUnderTheSameMsgIDs(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	m := telemetry.NewMetrics()
	r.run(processor.Options{Metrics: m, Handler: twoOutputs()})
	k := key("evt_lost")
	r.publish(k.EventID, `{"n":1}`, "") // seq 1
	r.settled(1)
	r.tr.CaughtUp(t, 30*time.Second)

	want := []string{envelope.OutboxMsgID(k, inbox.ModeOriginal, "", 0), envelope.OutboxMsgID(k, inbox.ModeOriginal, "", 1)}
	if got := r.outboxMsgIDs(k.EventID); !slices.Equal(got, want) {
		t.Fatalf("outbox msg ids %v, want %v", got, want)
	}
	first, n := r.outMsgIDs(k.EventID)
	if !slices.Equal(first, want) || n != 2 {
		t.Fatalf("INTAKE_OUT holds %v (%d messages), want %v", first, n, want)
	}

	// The commit is lost behind Intake's back: the new primary never saw the
	// transaction (inbox row, history, execution, outbox rows, the business
	// row), while INTAKE_OUT keeps what was published from it.
	ctx := context.Background()
	for _, q := range []string{
		`DELETE FROM intake.inbox WHERE event_id = $1`, `DELETE FROM intake.deliveries WHERE event_id = $1`,
		`DELETE FROM intake.executions WHERE event_id = $1`, `DELETE FROM intake.outbox WHERE event_id = $1`,
		`DELETE FROM effects WHERE key = 'demo/main/' || $1`,
	} {
		if _, err := r.db.Exec(ctx, q, k.EventID); err != nil {
			t.Fatal(err)
		}
	}
	r.replay(1, inbox.ReplayExact)
	r.settled(1)
	r.tr.CaughtUp(t, 30*time.Second)

	if n := r.count(`SELECT count(*) FROM intake.executions WHERE event_id = $1 AND mode = 'original'`, k.EventID); n != 1 {
		t.Fatalf("%d original executions after the re-drive, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM effects WHERE key = $1`, k.String()); n != 1 {
		t.Fatalf("%d business rows after the re-drive, want 1", n)
	}
	if got := r.outboxMsgIDs(k.EventID); !slices.Equal(got, want) {
		t.Fatalf("outbox msg ids after the re-drive %v, want the first run's %v", got, want)
	}
	if got, n := r.outMsgIDs(k.EventID); !slices.Equal(got, want) || n != 2 {
		t.Fatalf("INTAKE_OUT after the re-drive holds %v (%d messages), want the first run's %v alone", got, n, want)
	}
	// Both runs' rows were published; the stream answered the second as duplicates.
	if n := testutil.ToFloat64(m.OutboxPublished); n != 2 {
		t.Fatalf("%v outbox messages counted as published, want 2", n)
	}

	// A re-execution runs the handler again on purpose: new ids, its replay's.
	re := r.replay(1, inbox.ReplayReexecute)
	testenv.Eventually(t, 30*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.executions WHERE event_id = $1 AND mode = 'reexecute'`, k.EventID) == 1
	}, "re-execution never recorded")
	r.settled(1)
	r.tr.CaughtUp(t, 30*time.Second)
	reIDs := []string{envelope.OutboxMsgID(k, inbox.ModeReexecute, re, 0), envelope.OutboxMsgID(k, inbox.ModeReexecute, re, 1)}
	if got, n := r.outMsgIDs(k.EventID); !slices.Equal(got, append(want, reIDs...)) || n != 4 {
		t.Fatalf("INTAKE_OUT after the re-execution holds %v (%d messages), want %v then %v", got, n, want, reIDs)
	}
}
