package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
)

// lockKeys takes a transaction-scoped advisory lock per scoped key, in hash
// order. The inbox claim and the receipt fold both take them first, in the
// same order, so a receipt and the claim of its event serialise: whichever
// commits second sees the other, and delivery_count is exact.
func lockKeys(ctx context.Context, tx pgx.Tx, keys []string) error {
	_, err := tx.Exec(ctx, lockKeysSQL, keys)
	if err != nil {
		return fmt.Errorf("store: lock keys: %w", err)
	}
	return nil
}

const lockKeysSQL = `SELECT pg_advisory_xact_lock(h)
	FROM (SELECT DISTINCT hashtextextended(k, 7001) AS h FROM unnest($1::text[]) AS k) AS t ORDER BY h`

// FoldReceipts records receipts in the delivery history and sets each
// affected inbox row's delivery_count to the number of deliveries recorded.
// Idempotent: a receipt folded twice is recorded once.
func FoldReceipts(ctx context.Context, tx pgx.Tx, rs []envelope.Receipt) (int, error) {
	if len(rs) == 0 {
		return 0, nil
	}
	ds, keys := make([]DeliveryRecord, len(rs)), make([]string, len(rs))
	for i, r := range rs {
		ds[i] = DeliveryRecord{ReceiptID: r.ID, Key: r.Key, ReceivedAt: r.ReceivedAt, Instance: r.Instance,
			StatusCode: r.StatusCode, Answer: string(r.Answer), RetryHints: r.RetryHints}
		keys[i] = r.Key.String()
	}
	args, err := deliveryArgs(ds)
	if err != nil {
		return 0, err
	}
	if err := lockKeys(ctx, tx, keys); err != nil {
		return 0, err
	}
	tag, err := tx.Exec(ctx, insertDeliveries, args...)
	if err != nil {
		return 0, fmt.Errorf("store: fold receipts: %w", err)
	}
	if _, err = tx.Exec(ctx, recountDeliveries, args[1:4]...); err != nil {
		return 0, fmt.Errorf("store: count deliveries: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

const insertDeliveries = `
	INSERT INTO intake.deliveries (receipt_id, integration, account, event_id, received_at, instance,
		status_code, answer, retry_hints)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[],
		$7::int[], $8::text[], $9::jsonb[])
	ON CONFLICT (integration, account, event_id, receipt_id) DO NOTHING`

// recountDeliveries sets delivery_count (and last_received_at) of the given
// keys from their history, touching only rows that change: the common event,
// delivered once, is never rewritten. The history is read per key through its
// index (LATERAL): a join over all of it grew with the table.
const recountDeliveries = `
	UPDATE intake.inbox i
	SET delivery_count = c.n, last_received_at = greatest(i.last_received_at, c.last)
	FROM (SELECT DISTINCT * FROM unnest($1::text[], $2::text[], $3::text[])) AS t(integration, account, event_id)
	CROSS JOIN LATERAL (
		SELECT count(*) AS n, max(d.received_at) AS last
		FROM intake.deliveries d
		WHERE d.integration = t.integration AND d.account = t.account AND d.event_id = t.event_id
	) c
	WHERE i.integration = t.integration AND i.account = t.account AND i.event_id = t.event_id
	  AND c.n > 0 AND (i.delivery_count <> c.n OR i.last_received_at < c.last)`

// DeliveryRecord is one row of an event's delivery history.
type DeliveryRecord struct {
	Key        envelope.Key
	ReceiptID  string
	ReceivedAt time.Time
	Instance   string
	StatusCode int
	Answer     string
	RetryHints map[string]string
}
