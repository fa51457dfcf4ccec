package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
)

// ReceiptsWithoutEvent finds events a delivery receipt received in
// [since, until) answered "duplicate" — so INTAKE_IN held their message —
// that have neither an inbox row nor a rejection: once every message
// stored before until is settled, such an event's message was lost. It
// returns how many events, and up to sample of their keys.
func (s *Store) ReceiptsWithoutEvent(ctx context.Context, since, until time.Time, sample int) (int, []envelope.Key, error) {
	// 'duplicate' is envelope.AnswerDuplicate (answer_test.go).
	rows, err := s.pool.Query(ctx, `
		SELECT d.integration, d.account, d.event_id, count(*) OVER ()
		FROM intake.deliveries d
		WHERE d.received_at >= $1 AND d.received_at < $2 AND d.answer = 'duplicate'
		  AND NOT EXISTS (SELECT 1 FROM intake.inbox i
		      WHERE i.integration = d.integration AND i.account = d.account AND i.event_id = d.event_id)
		  AND NOT EXISTS (SELECT 1 FROM intake.rejected_messages r
		      WHERE r.integration = d.integration AND r.account = d.account AND r.event_id = d.event_id)
		GROUP BY d.integration, d.account, d.event_id
		ORDER BY d.integration, d.account, d.event_id
		LIMIT $3`, since, until, max(sample, 1))
	if err != nil {
		return 0, nil, fmt.Errorf("store: receipts without an event: %w", err)
	}
	var n int
	var keys []envelope.Key
	var k envelope.Key
	var total int64
	_, err = pgx.ForEachRow(rows, []any{&k.Integration, &k.Account, &k.EventID, &total}, func() error {
		n = int(total)
		if len(keys) < sample {
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("store: receipts without an event: %w", err)
	}
	return n, keys, nil
}
