package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/intakehq/intake/pkg/envelope"
)

// RejectReplayedBody: an integration with replay_guard on received this
// message's body (payload SHA-256) before, under another key. The signature
// covers the body, not the id: one captured body sent again under fresh ids
// would otherwise be a new event each time.
const RejectReplayedBody = "replayed_body"

// BodyClaim is one message of a guarded integration: its key and body hash.
type BodyClaim struct {
	Key           envelope.Key
	PayloadSHA256 string
	StreamSeq     uint64
}

// FirstKeys records, for each claim's (integration, payload hash), the first
// key that brought the body (INSERT … ON CONFLICT DO NOTHING, in hash order
// so that two processors lock in one order, copies within the batch by
// stream sequence), and returns that first key per claim. A claim whose
// first key is not its own carries a body already accepted under another id.
//
// It must run before ClaimBatch in the same transaction: its row locks are
// taken before the key locks, by every caller, so the two cannot deadlock.
// A concurrent transaction inserting the same hash makes the insert wait for
// its commit (or rollback: then this one is first).
func FirstKeys(ctx context.Context, tx pgx.Tx, claims []BodyClaim) ([]envelope.Key, error) {
	n := len(claims)
	if n == 0 {
		return nil, nil
	}
	integ, sha, acct, evID, seq := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	for i, c := range claims {
		integ[i], sha[i], acct[i], evID[i], seq[i] = c.Key.Integration, c.PayloadSHA256, c.Key.Account, c.Key.EventID, int64(c.StreamSeq)
	}
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO intake.body_hashes (integration, payload_sha256, account, event_id)
		SELECT t.integration, t.sha, t.account, t.event_id
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) AS t(integration, sha, account, event_id, seq)
		ORDER BY t.integration, t.sha, t.seq
		ON CONFLICT (integration, payload_sha256) DO NOTHING`, integ, sha, acct, evID, seq)
	b.Queue(`
		SELECT h.integration, h.payload_sha256, h.account, h.event_id
		FROM intake.body_hashes h
		JOIN (SELECT DISTINCT * FROM unnest($1::text[], $2::text[])) AS t(integration, payload_sha256)
		  USING (integration, payload_sha256)`, integ, sha)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("store: record body hashes: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("store: read body hashes: %w", err)
	}
	type body struct{ integration, sha string }
	first := map[body]envelope.Key{}
	var (
		bd body
		k  envelope.Key
	)
	_, err = pgx.ForEachRow(rows, []any{&bd.integration, &bd.sha, &k.Account, &k.EventID}, func() error {
		k.Integration = bd.integration
		first[bd] = k
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: read body hashes: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("store: body hashes: %w", err)
	}
	out := make([]envelope.Key, n)
	for i, c := range claims {
		k, ok := first[body{c.Key.Integration, c.PayloadSHA256}]
		if !ok {
			return nil, fmt.Errorf("store: body hash of %s neither inserted nor found", c.Key)
		}
		out[i] = k
	}
	return out, nil
}

// KeepFirstKey records k as the first key of its body (integration,
// payload hash) unless one is recorded, outside any batch. The processor
// calls it when a guarded message's handler fails: the batch's transaction
// that recorded the body rolled back, and without this a copy under a fresh
// id arriving before the retry would become the body's first key — applied
// under the copy's id and type, and the original refused.
func KeepFirstKey(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, k envelope.Key, payloadSHA256 string) error {
	_, err := db.Exec(ctx, `INSERT INTO intake.body_hashes (integration, payload_sha256, account, event_id)
		VALUES ($1, $2, $3, $4) ON CONFLICT (integration, payload_sha256) DO NOTHING`,
		k.Integration, payloadSHA256, k.Account, k.EventID)
	if err != nil {
		return fmt.Errorf("store: keep first key of %s: %w", k, err)
	}
	return nil
}
