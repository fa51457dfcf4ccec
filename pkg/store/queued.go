package store

import (
	"context"
	"fmt"

	"github.com/intakehq/intake/pkg/envelope"
)

// QueuedForReplay returns those of keys that a running replay (not a
// redelivery) has yet to publish: their copy is on its way, so starting
// another replay of them would only add a duplicate.
func (s *Store) QueuedForReplay(ctx context.Context, keys []envelope.Key) (map[envelope.Key]bool, error) {
	out := map[envelope.Key]bool{}
	for start := 0; start < len(keys); start += keyChunk {
		integ, acct, id := keyColumns(keys[start:min(start+keyChunk, len(keys))])
		rows, err := s.pool.Query(ctx, `
			SELECT DISTINCT i.integration, i.account, i.event_id
			FROM intake.replay_items i
			JOIN unnest($1::text[], $2::text[], $3::text[]) AS t(integration, account, event_id)
			  USING (integration, account, event_id)
			JOIN intake.replays r ON r.id = i.replay_id
			WHERE i.state = $4 AND r.state = $5 AND r.mode <> $6`,
			integ, acct, id, ItemPending, ReplayRunning, ReplayRedeliver)
		if err != nil {
			return nil, fmt.Errorf("store: keys queued for replay: %w", err)
		}
		for rows.Next() {
			var k envelope.Key
			if err := rows.Scan(&k.Integration, &k.Account, &k.EventID); err != nil {
				rows.Close()
				return nil, fmt.Errorf("store: keys queued for replay: %w", err)
			}
			out[k] = true
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("store: keys queued for replay: %w", err)
		}
	}
	return out, nil
}
