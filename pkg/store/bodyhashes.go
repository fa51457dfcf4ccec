package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/intakehq/intake/pkg/envelope"
)

// RejectReplayedBody: an integration with replay_guard on received this
// message's body (payload SHA-256) before, as the same event type, under
// another key. The signature covers the body, not the id (nor the type): one
// captured body sent again under fresh ids would otherwise be a new event
// each time.
const RejectReplayedBody = "replayed_body"

// BodyClaim is one message of a guarded integration: its key, type and body
// hash.
type BodyClaim struct {
	Key           envelope.Key
	EventType     string
	PayloadSHA256 string
	StreamSeq     uint64
}

// anyType is the event_type of the rows recorded before migration 00017:
// such a row guards its body under every type until the purge removes it.
const anyType = ""

// FirstKeys records, for each claim's (integration, payload hash, event
// type), the first key that brought the body as that type (INSERT … ON
// CONFLICT DO NOTHING, in hash order so that two processors lock in one
// order, copies within the batch by stream sequence), and returns that
// first key per claim. A row of the body with event type ” (older than the
// type column) is the first key of every type. A claim whose first key is
// not its own carries a body already accepted, as its type, under another
// id.
//
// It must run before ClaimBatch in the same transaction: its row locks are
// taken before the key locks, by every caller, so the two cannot deadlock.
// A concurrent transaction inserting the same row makes the insert wait for
// its commit (or rollback: then this one is first).
func FirstKeys(ctx context.Context, tx pgx.Tx, claims []BodyClaim) ([]envelope.Key, error) {
	n := len(claims)
	if n == 0 {
		return nil, nil
	}
	integ, sha, typ, acct, evID, seq := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	for i, c := range claims {
		integ[i], sha[i], typ[i], acct[i], evID[i], seq[i] = c.Key.Integration, c.PayloadSHA256, c.EventType, c.Key.Account, c.Key.EventID, int64(c.StreamSeq)
	}
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO intake.body_hashes (integration, payload_sha256, event_type, account, event_id)
		SELECT t.integration, t.sha, t.event_type, t.account, t.event_id
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])
			AS t(integration, sha, event_type, account, event_id, seq)
		WHERE NOT EXISTS (SELECT 1 FROM intake.body_hashes h
			WHERE h.integration = t.integration AND h.payload_sha256 = t.sha AND h.event_type = '')
		ORDER BY t.integration, t.sha, t.event_type, t.seq
		ON CONFLICT (integration, payload_sha256, event_type) DO NOTHING`, integ, sha, typ, acct, evID, seq)
	queueReadFirstKeys(b, integ, sha)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("store: record body hashes: %w", err)
	}
	out, err := readFirstKeys(br, claims)
	if err != nil {
		return nil, err
	}
	for i, k := range out {
		if k == (envelope.Key{}) {
			return nil, fmt.Errorf("store: body hash of %s neither inserted nor found", claims[i].Key)
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("store: body hashes: %w", err)
	}
	return out, nil
}

// BodyFirstKeys is FirstKeys without the insert: the first key the guard
// holds for each claim's body and type, the zero Key where it holds none.
// The replayer's dry run predicts the guard with it.
func (s *Store) BodyFirstKeys(ctx context.Context, claims []BodyClaim) ([]envelope.Key, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	integ, sha := make([]string, len(claims)), make([]string, len(claims))
	for i, c := range claims {
		integ[i], sha[i] = c.Key.Integration, c.PayloadSHA256
	}
	b := &pgx.Batch{}
	queueReadFirstKeys(b, integ, sha)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	out, err := readFirstKeys(br, claims)
	if err != nil {
		return nil, err
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("store: body hashes: %w", err)
	}
	return out, nil
}

func queueReadFirstKeys(b *pgx.Batch, integ, sha []string) {
	b.Queue(`
		SELECT h.integration, h.payload_sha256, h.event_type, h.account, h.event_id
		FROM intake.body_hashes h
		JOIN (SELECT DISTINCT * FROM unnest($1::text[], $2::text[])) AS t(integration, payload_sha256)
		  USING (integration, payload_sha256)`, integ, sha)
}

// readFirstKeys reads queueReadFirstKeys' rows and picks each claim's first
// key: the body's ” row if it has one (older, guarding every type), else
// the row of the claim's type; the zero Key without either.
func readFirstKeys(br pgx.BatchResults, claims []BodyClaim) ([]envelope.Key, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("store: read body hashes: %w", err)
	}
	type body struct{ integration, sha, eventType string }
	first := map[body]envelope.Key{}
	var (
		bd body
		k  envelope.Key
	)
	_, err = pgx.ForEachRow(rows, []any{&bd.integration, &bd.sha, &bd.eventType, &k.Account, &k.EventID}, func() error {
		k.Integration = bd.integration
		first[bd] = k
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: read body hashes: %w", err)
	}
	out := make([]envelope.Key, len(claims))
	for i, c := range claims {
		k, ok := first[body{c.Key.Integration, c.PayloadSHA256, anyType}]
		if !ok {
			k = first[body{c.Key.Integration, c.PayloadSHA256, c.EventType}]
		}
		out[i] = k
	}
	return out, nil
}

// KeepFirstKey records k as the first key of its body (integration,
// payload hash) as eventType unless one is recorded, outside any batch. The
// processor calls it when a guarded message's handler fails: the batch's
// transaction that recorded the body rolled back, and without this a copy
// under a fresh id arriving before the retry would become the body's first
// key — applied under the copy's id, and the original refused.
func KeepFirstKey(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, k envelope.Key, eventType, payloadSHA256 string) error {
	_, err := db.Exec(ctx, `INSERT INTO intake.body_hashes (integration, payload_sha256, event_type, account, event_id)
		SELECT $1, $2, $3, $4, $5
		WHERE NOT EXISTS (SELECT 1 FROM intake.body_hashes WHERE integration = $1 AND payload_sha256 = $2 AND event_type = '')
		ON CONFLICT (integration, payload_sha256, event_type) DO NOTHING`,
		k.Integration, payloadSHA256, eventType, k.Account, k.EventID)
	if err != nil {
		return fmt.Errorf("store: keep first key of %s: %w", k, err)
	}
	return nil
}
