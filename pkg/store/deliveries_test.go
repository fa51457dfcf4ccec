package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
)

// delivery_count is the length of the event's history whatever the order:
// receipts of stream-stopped copies folded before the claim are counted by
// the claim, and a copy in the claim's own batch by the recount.
func TestDeliveryCountWhateverTheOrder(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	early := envelope.Key{Integration: "demo", Account: "main", EventID: "folded_first"}
	batched := envelope.Key{Integration: "demo", Account: "main", EventID: "two_in_one_batch"}

	// Two copies of `early` were stopped by the stream window and their
	// receipts folded before the processor got to the original.
	err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		_, err := store.FoldReceipts(ctx, tx, []envelope.Receipt{
			{ID: "r1", Key: early, ReceivedAt: t0.Add(time.Second), Instance: "ingress-a", StatusCode: 200, Answer: "duplicate"},
			{ID: "r2", Key: early, ReceivedAt: t0.Add(2 * time.Second), Instance: "ingress-b", StatusCode: 200, Answer: "duplicate"},
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	claim := func(k envelope.Key, seq uint64, at time.Time) store.BatchClaim {
		return store.BatchClaim{Claim: store.Claim{Key: k, Tenant: "acme", EventType: "x", PayloadSHA256: "sha", StreamSeq: seq, ReceivedAt: at}}
	}
	delivery := func(k envelope.Key, seq uint64, at time.Time) store.DeliveryRecord {
		return store.DeliveryRecord{ReceiptID: envelope.StreamReceiptID(seq), Key: k, ReceivedAt: at, Instance: "ingress-a", StatusCode: 200, Answer: "accepted"}
	}
	// One batch: the original of `early`, and `batched` twice (a copy past
	// the duplicate window landed next to its original).
	claims := []store.BatchClaim{claim(batched, 20, t0), claim(batched, 21, t0.Add(3*time.Second)), claim(early, 10, t0)}
	err = pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		inserted, _, err := store.ClaimBatch(ctx, tx, claims)
		if err != nil {
			return err
		}
		if !inserted[0] || inserted[1] || !inserted[2] {
			t.Errorf("inserted = %v; want the lower sequence of each key", inserted)
		}
		w := store.BatchWrites{
			FirstDeliveries: []store.DeliveryRecord{delivery(batched, 20, t0), delivery(early, 10, t0)},
			Deliveries:      []store.DeliveryRecord{delivery(batched, 21, t0.Add(3*time.Second))},
		}
		return w.Flush(ctx, tx)
	})
	if err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		key  envelope.Key
		want int
		last time.Time
	}{{early, 3, t0.Add(2 * time.Second)}, {batched, 2, t0.Add(3 * time.Second)}} {
		var count, history int
		var last time.Time
		err := st.Pool().QueryRow(ctx, `SELECT delivery_count, last_received_at,
				(SELECT count(*) FROM intake.deliveries d WHERE d.event_id = i.event_id)
			FROM intake.inbox i WHERE event_id = $1`, tt.key.EventID).Scan(&count, &last, &history)
		if err != nil {
			t.Fatal(err)
		}
		if count != tt.want || history != tt.want || !last.Equal(tt.last) {
			t.Errorf("%s: delivery_count %d, history %d, last_received_at %s; want %d, %d, %s",
				tt.key.EventID, count, history, last, tt.want, tt.want, tt.last)
		}
	}
}

// A redelivery of a stream message can land in the same batch as the
// original (it waited in the client buffer past its ack deadline): only one
// of the two claims the row, the other finds it.
func TestSameMessageTwiceInOneBatchClaimsOnce(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	k := envelope.Key{Integration: "demo", Account: "main", EventID: "twice"}
	c := store.BatchClaim{Claim: store.Claim{Key: k, Tenant: "acme", EventType: "x", PayloadSHA256: "sha", StreamSeq: 7, ReceivedAt: time.Now()}}
	err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		inserted, existing, err := store.ClaimBatch(ctx, tx, []store.BatchClaim{c, c})
		if err != nil {
			return err
		}
		if inserted[0] == inserted[1] {
			t.Errorf("inserted = %v; want exactly one claim", inserted)
		}
		if row, ok := existing[k]; !ok || row.StreamSeq != 7 {
			t.Errorf("existing = %v; want the row just claimed, for the other copy", existing)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A failed event keeps its history: RecordFailure writes the failed
// delivery's history row and counts it with the receipts folded before it;
// the same delivery recorded again is not counted twice, a replay is no
// delivery, and a processed row keeps its status but counts the delivery.
func TestRecordFailureKeepsTheHistory(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	k := envelope.Key{Integration: "demo", Account: "main", EventID: "fails"}
	err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		_, err := store.FoldReceipts(ctx, tx, []envelope.Receipt{
			{ID: "r1", Key: k, ReceivedAt: t0.Add(time.Second), Instance: "ingress-a", StatusCode: 200, Answer: "duplicate"},
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(seq uint64, at time.Time) store.Claim {
		return store.Claim{Key: k, Tenant: "acme", EventType: "x", PayloadSHA256: "sha", StreamSeq: seq, ReceivedAt: at}
	}
	delivery := func(seq uint64, at time.Time) *store.DeliveryRecord {
		return &store.DeliveryRecord{ReceiptID: envelope.StreamReceiptID(seq), Key: k, ReceivedAt: at, Instance: "ingress-a", StatusCode: 200, Answer: "accepted"}
	}
	check := func(step string, status inbox.Status, attempts, count int, last time.Time) {
		t.Helper()
		var gotStatus string
		var gotAttempts, gotCount, history int
		var gotLast time.Time
		err := st.Pool().QueryRow(ctx, `SELECT status, attempts, delivery_count, last_received_at,
				(SELECT count(*) FROM intake.deliveries d WHERE d.event_id = i.event_id)
			FROM intake.inbox i WHERE event_id = $1`, k.EventID).Scan(&gotStatus, &gotAttempts, &gotCount, &gotLast, &history)
		if err != nil {
			t.Fatal(err)
		}
		if gotStatus != string(status) || gotAttempts != attempts || gotCount != count || history != count || !gotLast.Equal(last) {
			t.Errorf("%s: status %s, attempts %d, delivery_count %d, history %d, last_received_at %s; want %s, %d, %d, %d, %s",
				step, gotStatus, gotAttempts, gotCount, history, gotLast, status, attempts, count, count, last)
		}
	}

	if err := store.RecordFailure(ctx, st.Pool(), claim(30, t0), delivery(30, t0), inbox.StatusFailed, 5, "boom"); err != nil {
		t.Fatal(err)
	}
	check("first failure", inbox.StatusFailed, 5, 2, t0.Add(time.Second))
	if err := store.RecordFailure(ctx, st.Pool(), claim(30, t0), delivery(30, t0), inbox.StatusFailed, 5, "boom"); err != nil {
		t.Fatal(err)
	}
	check("same delivery again", inbox.StatusFailed, 6, 2, t0.Add(time.Second))
	if err := store.RecordFailure(ctx, st.Pool(), claim(31, t0.Add(5*time.Second)), delivery(31, t0.Add(5*time.Second)), inbox.StatusQuarantined, 1, "bad"); err != nil {
		t.Fatal(err)
	}
	check("a later delivery", inbox.StatusQuarantined, 7, 3, t0.Add(5*time.Second))
	if err := store.RecordFailure(ctx, st.Pool(), claim(30, t0), nil, inbox.StatusFailed, 1, "replay failed"); err != nil {
		t.Fatal(err)
	}
	check("a replay", inbox.StatusFailed, 8, 3, t0.Add(5*time.Second))

	if _, err := st.Pool().Exec(ctx, `UPDATE intake.inbox SET status = 'processed' WHERE event_id = $1`, k.EventID); err != nil {
		t.Fatal(err)
	}
	if err := store.RecordFailure(ctx, st.Pool(), claim(32, t0.Add(9*time.Second)), delivery(32, t0.Add(9*time.Second)), inbox.StatusFailed, 1, "late"); err != nil {
		t.Fatal(err)
	}
	check("a processed row", inbox.StatusProcessed, 8, 4, t0.Add(9*time.Second))
}
