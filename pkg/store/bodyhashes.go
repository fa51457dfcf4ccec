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

// RejectReasons are every reason a rejection may have, in the order the
// docs list them: the allowed values of a reason filter.
var RejectReasons = []string{RejectUnknownIntegration, RejectTenantMismatch, RejectSubjectMismatch,
	RejectUnknownReplay, RejectReplayNotCovering, RejectPayloadMismatch, RejectReplayedBody,
	RejectBadEnvelopeSignature, RejectUnsignedEnvelope, RejectMalformed}

// BodyClaim is one message of a guarded integration: its key, type and body
// hash.
type BodyClaim struct {
	Key           envelope.Key
	EventType     string
	PayloadSHA256 string
	StreamSeq     uint64
}

// FirstKeys records, for each claim's (integration, payload hash, event
// type), the first key that brought the body as that type, and returns that
// first key per claim. A claim whose first key is not its own carries a body
// already accepted, as its type, under another id.
//
// Two tables hold first keys. intake.body_hashes is the one of 0.16 and
// before, keyed on the body alone (and written by 0.16 processors while a
// roll to 0.17 runs): its row is the first key of every type, and no type
// of that body is recorded beside it. intake.body_type_hashes (migration
// 00017) holds the rest, one row per body and type: an INSERT … ON CONFLICT
// DO NOTHING of the claims whose body has no body_hashes row, in (integration,
// hash, type) order, copies within the batch by stream sequence. A 0.16
// processor reads body_hashes alone: while one runs, the bodies recorded
// here do not guard its messages (the roll's window, CHANGELOG 0.17).
//
// It must run before ClaimBatch in the same transaction. Its only row locks
// are those inserts' (the reads of body_hashes lock nothing), taken in that
// one order by every caller and before the key locks: two processors cannot
// deadlock on them, nor on the claim. A concurrent transaction inserting the
// same row makes the insert wait for its commit (or rollback: then this one
// is first).
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
		INSERT INTO intake.body_type_hashes (integration, payload_sha256, event_type, account, event_id)
		SELECT t.integration, t.sha, t.event_type, t.account, t.event_id
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])
			AS t(integration, sha, event_type, account, event_id, seq)
		WHERE NOT EXISTS (SELECT 1 FROM intake.body_hashes h
			WHERE h.integration = t.integration AND h.payload_sha256 = t.sha)
		ORDER BY t.integration, t.sha, t.event_type, t.seq
		ON CONFLICT (integration, payload_sha256, event_type) DO NOTHING`, integ, sha, typ, acct, evID, seq)
	queueReadFirstKeys(b, integ, sha, typ)
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
	integ, sha, typ := make([]string, len(claims)), make([]string, len(claims)), make([]string, len(claims))
	for i, c := range claims {
		integ[i], sha[i], typ[i] = c.Key.Integration, c.PayloadSHA256, c.EventType
	}
	b := &pgx.Batch{}
	queueReadFirstKeys(b, integ, sha, typ)
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

// queueReadFirstKeys reads the claims' first keys from both tables: the
// body's body_hashes row (legacy: event_type NULL) and its row of each
// claim's type.
func queueReadFirstKeys(b *pgx.Batch, integ, sha, typ []string) {
	b.Queue(`
		SELECT h.integration, h.payload_sha256, NULL::text, h.account, h.event_id
		FROM intake.body_hashes h
		JOIN (SELECT DISTINCT integration, payload_sha256 FROM unnest($1::text[], $2::text[]) AS t(integration, payload_sha256)) AS t
		  USING (integration, payload_sha256)
		UNION ALL
		SELECT h.integration, h.payload_sha256, h.event_type, h.account, h.event_id
		FROM intake.body_type_hashes h
		JOIN (SELECT DISTINCT * FROM unnest($1::text[], $2::text[], $3::text[])) AS t(integration, payload_sha256, event_type)
		  USING (integration, payload_sha256, event_type)`, integ, sha, typ)
}

// readFirstKeys reads queueReadFirstKeys' rows and picks each claim's first
// key: the body's body_hashes row if it has one (guarding every type), else
// its body_type_hashes row of the claim's type; the zero Key without either.
func readFirstKeys(br pgx.BatchResults, claims []BodyClaim) ([]envelope.Key, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("store: read body hashes: %w", err)
	}
	type body struct{ integration, sha, eventType string }
	legacy, typed := map[body]envelope.Key{}, map[body]envelope.Key{}
	var (
		bd  body
		typ *string
		k   envelope.Key
	)
	_, err = pgx.ForEachRow(rows, []any{&bd.integration, &bd.sha, &typ, &k.Account, &k.EventID}, func() error {
		k.Integration = bd.integration
		if typ == nil {
			legacy[body{bd.integration, bd.sha, ""}] = k
		} else {
			typed[body{bd.integration, bd.sha, *typ}] = k
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: read body hashes: %w", err)
	}
	out := make([]envelope.Key, len(claims))
	for i, c := range claims {
		k, ok := legacy[body{c.Key.Integration, c.PayloadSHA256, ""}]
		if !ok {
			k = typed[body{c.Key.Integration, c.PayloadSHA256, c.EventType}]
		}
		out[i] = k
	}
	return out, nil
}

// KeepFirstKey records k as the first key of its body (integration,
// payload hash) as eventType, in intake.body_type_hashes, unless one is
// recorded for that type or the body has a body_hashes row (its first key
// of every type, see FirstKeys), outside any batch. The
// processor calls it when a guarded message's handler fails: the batch's
// transaction that recorded the body rolled back, and without this a copy
// under a fresh id arriving before the retry would become the body's first
// key — applied under the copy's id, and the original refused.
func KeepFirstKey(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, k envelope.Key, eventType, payloadSHA256 string) error {
	_, err := db.Exec(ctx, `INSERT INTO intake.body_type_hashes (integration, payload_sha256, event_type, account, event_id)
		SELECT $1, $2, $3, $4, $5
		WHERE NOT EXISTS (SELECT 1 FROM intake.body_hashes WHERE integration = $1 AND payload_sha256 = $2)
		ON CONFLICT (integration, payload_sha256, event_type) DO NOTHING`,
		k.Integration, payloadSHA256, eventType, k.Account, k.EventID)
	if err != nil {
		return fmt.Errorf("store: keep first key of %s: %w", k, err)
	}
	return nil
}
