package inboxcases

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
)

// What the integration tests need to put a case into a real inbox and
// stream. Case i has an integration of its own, so the processor's outcome
// metric (by integration) tells the cases apart in one run.

// Key is case i's scoped key.
func Key(i int) envelope.Key {
	return envelope.Key{Integration: fmt.Sprintf("case%02d", i), Account: "main", EventID: "evt"}
}

// Bodies are case i's row payload and message payload.
func (c Case) Bodies(i int) (row, msg []byte) {
	row = fmt.Appendf(nil, `{"case":%d}`, i)
	if c.OtherPayload {
		return row, fmt.Appendf(nil, `{"case":%d,"other":true}`, i)
	}
	return row, row
}

// Msg is case i's message for INTAKE_IN: as ingress publishes it, or, with
// asCopy and a replay mode, as the replayer republishes it.
func (c Case) Msg(i int, asCopy bool) *nats.Msg {
	_, body := c.Bodies(i)
	m := envelope.NewDelivery(Key(i), "acme", "case.tested", body, time.Now()).Msg()
	if asCopy && c.Replay != inbox.ReplayNone {
		id := ReplayID(i)
		m.Header.Set(envelope.HeaderMsgID, copyMsgID(i))
		m.Header.Set(envelope.HeaderReplayID, id)
		m.Header.Set(envelope.HeaderReplayMode, string(c.Replay))
	}
	return m
}

// ReplayID is the id of the replay that published case i's copy.
func ReplayID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// copyMsgID is the Nats-Msg-Id of case i's copy, as the replayer names it.
func copyMsgID(i int) string { return envelope.ReplayMsgID(ReplayID(i), Key(i)) }

// SeedReplay records the replay that published case i's copy, at copySeq
// in INTAKE_IN, as the replayer records one: the processor applies a copy
// only when a recorded replay covers it. Nothing for a case without a copy.
func (c Case) SeedReplay(ctx context.Context, db Execer, i int, copySeq uint64) error {
	if c.Replay == inbox.ReplayNone {
		return nil
	}
	k := Key(i)
	_, err := db.Exec(ctx, `WITH r AS (
			INSERT INTO intake.replays (id, requested_by, selector, mode, reason, dry_run, rate, state, matched, published)
			VALUES ($1, 'inboxcases', '{}', $2, 'decision table', false, 1, 'done', 1, 1) RETURNING id)
		INSERT INTO intake.replay_items (replay_id, pos, integration, account, event_id, tenant, event_type,
			stream_seq, msg_id, outcome, state, published_seq, published_at)
		SELECT r.id, 0, $3, $4, $5, 'acme', 'case.tested', NULL, $6, 'seeded', 'published', $7, now() FROM r`,
		ReplayID(i), string(c.Replay), k.Integration, k.Account, k.EventID, copyMsgID(i), int64(copySeq))
	if err != nil {
		return fmt.Errorf("seed replay of %s: %w", c.Name, err)
	}
	if c.Executed { // the copy ran once already: its execution records its sequence
		if _, err := db.Exec(ctx, `INSERT INTO intake.executions (integration, account, event_id, mode, replay_id, stream_seq)
			VALUES ($1, $2, $3, $4, $5, $6)`, k.Integration, k.Account, k.EventID, string(inbox.ModeReexecute), ReplayID(i),
			int64(copySeq)); err != nil {
			return fmt.Errorf("seed execution of %s: %w", c.Name, err)
		}
	}
	return nil
}

// Execer runs a statement (a pgx pool, conn or tx).
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Seed writes case i's inbox row in its status, claimed by the message at
// rowSeq; nothing for NoRow.
func (c Case) Seed(ctx context.Context, db Execer, i int, rowSeq uint64) error {
	if c.Row == NoRow {
		return nil
	}
	row, _ := c.Bodies(i)
	var processedAt *time.Time
	var errText *string
	now := time.Now()
	if c.Row.Retryable() {
		s := "seeded failure"
		errText = &s
	} else {
		processedAt = &now
	}
	k := Key(i)
	_, err := db.Exec(ctx, `INSERT INTO intake.inbox (integration, account, event_id, tenant, event_type, payload_sha256,
			status, first_received_at, last_received_at, processed_at, stream_seq, error)
		VALUES ($1, $2, $3, 'acme', 'case.tested', $4, $5, $6, $6, $7, $8, $9)`,
		k.Integration, k.Account, k.EventID, envelope.PayloadSHA256(row), string(c.Row), now, processedAt, int64(rowSeq), errText)
	if err != nil {
		return fmt.Errorf("seed %s: %w", c.Name, err)
	}
	return nil
}
