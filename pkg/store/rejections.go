package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/envelope"
)

// Why the processor refused a message (intake.rejected_messages.reason,
// the reason label of intake_processor_rejected_total).
const (
	// RejectUnknownIntegration: the key names no configured integration.
	RejectUnknownIntegration = "unknown_integration"
	// RejectTenantMismatch: Intake-Tenant is not the integration's tenant.
	RejectTenantMismatch = "tenant_mismatch"
	// RejectSubjectMismatch: the subject is not under intake.in.{integration}.
	RejectSubjectMismatch = "subject_mismatch"
	// RejectUnknownReplay: Intake-Replay-Id names no recorded replay that
	// published to INTAKE_IN in the message's mode.
	RejectUnknownReplay = "unknown_replay"
	// RejectReplayNotCovering: the replay is recorded but did not select
	// this key (or not this copy of it).
	RejectReplayNotCovering = "replay_not_covering"
	// RejectPayloadMismatch: a body that does not hash to its
	// Intake-Payload-Sha256: a replay copy's (the replayer copies the source
	// message as is), or with envelope keys configured any message's (the
	// signature covers the hash, not the body).
	RejectPayloadMismatch = "payload_mismatch"
	// RejectBadEnvelopeSignature: envelope keys are configured and the
	// message's Intake-Envelope-Signature verifies with none of them (or
	// does not parse).
	RejectBadEnvelopeSignature = "bad_envelope_signature"
	// RejectUnsignedEnvelope: envelope keys are configured, envelope.require
	// is on, and the message has no Intake-Envelope-Signature.
	RejectUnsignedEnvelope = "unsigned_envelope"
	// RejectMalformed: the envelope does not parse (envelope.ParseDelivery):
	// a header missing or refused, say Intake-Replay-Mode without
	// Intake-Replay-Id. The claimed key and tenant are recorded as sent,
	// "" where absent.
	RejectMalformed = "malformed"
)

// Rejection is one message the processor refused before the inbox decision.
type Rejection struct {
	ID            int64
	Key           string
	Integration   string
	Account       string
	EventID       string
	Tenant        string
	EventType     string
	PayloadSHA256 string
	StreamSeq     int64
	Subject       string
	MsgID         string
	ReplayID      *string
	ReplayMode    *string
	Reason        string
	Detail        string
	ReceivedAt    *time.Time
	RejectedAt    time.Time
	// Original is, for a replayed body (RejectReplayedBody), the key of
	// the event whose body the message carries; nil otherwise.
	Original *envelope.Key
	// OriginalKey is Original as a scoped key string ("" when nil).
	OriginalKey string
}

// ReplayCopy is what a message carrying Intake-Replay-Id claims: that the
// replay ReplayID, in Mode, published this copy (MsgID) of Key.
type ReplayCopy struct {
	ReplayID  string
	Mode      string
	Key       envelope.Key
	MsgID     string
	StreamSeq uint64 // where the copy is in INTAKE_IN
}

// CopyCheck is CheckReplayCopies' answer for one copy: Reason and Detail
// when it is not covered, else AdmitReplayedBody, the replay's
// admit_replayed_bodies (the replay guard passes the copy).
type CopyCheck struct {
	Reason, Detail    string
	AdmitReplayedBody bool
}

// CheckReplayCopies checks, in one query, that each copy is one a recorded
// replay published: the replay exists, is not a dry run, has the copy's
// mode, and has an item for the key with the copy's Nats-Msg-Id that was
// not found missing and, once its publish is recorded, landed at this very
// sequence (a republished copy of a genuine copy is not covered); before
// that is recorded, only while the replay is running. It returns a check
// per copy, by index.
func CheckReplayCopies(ctx context.Context, tx pgx.Tx, copies []ReplayCopy) ([]CopyCheck, error) {
	checks := make([]CopyCheck, len(copies))
	var (
		idx                          []int32
		ids, integ, acct, evID, msgs []string
	)
	for i, c := range copies {
		if !validUUID(c.ReplayID) {
			checks[i] = CopyCheck{Reason: RejectUnknownReplay, Detail: "replay id is not a replay's id"}
			continue
		}
		idx, ids = append(idx, int32(i)), append(ids, c.ReplayID)
		integ, acct, evID = append(integ, c.Key.Integration), append(acct, c.Key.Account), append(evID, c.Key.EventID)
		msgs = append(msgs, c.MsgID)
	}
	if len(idx) == 0 {
		return checks, nil
	}
	rows, err := tx.Query(ctx, `
		SELECT t.i, r.id IS NOT NULL, coalesce(r.mode, ''), coalesce(r.dry_run, false), coalesce(r.state, ''),
			coalesce(r.admit_replayed_bodies, false), ri.replay_id IS NOT NULL, coalesce(ri.state, ''), ri.published_seq
		FROM unnest($1::int[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[])
			AS t(i, replay_id, integration, account, event_id, msg_id)
		LEFT JOIN intake.replays r ON r.id = t.replay_id
		LEFT JOIN intake.replay_items ri ON ri.replay_id = t.replay_id AND ri.msg_id = t.msg_id
			AND ri.integration = t.integration AND ri.account = t.account AND ri.event_id = t.event_id`,
		idx, ids, integ, acct, evID, msgs)
	if err != nil {
		return nil, fmt.Errorf("store: check replay copies: %w", err)
	}
	var (
		i                          int32
		found, dry, admit, covered bool
		mode, replayState, state   string
		published                  *int64
	)
	_, err = pgx.ForEachRow(rows, []any{&i, &found, &mode, &dry, &replayState, &admit, &covered, &state, &published}, func() error {
		c := copies[i]
		switch {
		case !found:
			checks[i].Reason, checks[i].Detail = RejectUnknownReplay, "no replay recorded with this id"
		case dry:
			checks[i].Reason, checks[i].Detail = RejectUnknownReplay, "the replay is a dry run: it publishes nothing"
		case mode != c.Mode:
			checks[i].Reason, checks[i].Detail = RejectUnknownReplay, fmt.Sprintf("the replay's mode is %s, the message says %s", mode, c.Mode)
		case !covered:
			checks[i].Reason, checks[i].Detail = RejectReplayNotCovering, "the replay did not select this key (or no copy has this Nats-Msg-Id)"
		case state == ItemMissing:
			checks[i].Reason, checks[i].Detail = RejectReplayNotCovering, "the replay found this event's source message missing and published no copy"
		case published != nil && uint64(*published) != c.StreamSeq:
			checks[i].Reason, checks[i].Detail = RejectReplayNotCovering, fmt.Sprintf("the replay's copy of this key is at stream sequence %d", *published)
		case published == nil && replayState != ReplayRunning:
			// Only a running replay may still have a copy in flight whose
			// sequence it has not recorded yet; the unpublished items of a
			// cancelled, failed or finished replay cover nothing.
			checks[i].Reason, checks[i].Detail = RejectReplayNotCovering, fmt.Sprintf("the replay is %s and published no copy of this key", replayState)
		default:
			checks[i].AdmitReplayedBody = admit
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: check replay copies: %w", err)
	}
	return checks, nil
}

// RecordRejections records rs outside any batch: messages refused before
// they could join one (RejectMalformed). A row already recorded for the
// same stream sequence and key is left as it is.
func (s *Store) RecordRejections(ctx context.Context, rs []Rejection) error {
	if len(rs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	queueRejections(b, rs)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("store: record rejections: %w", err)
	}
	return nil
}

// queueRejections adds the insert of rs to b.
func queueRejections(b *pgx.Batch, rs []Rejection) {
	n := len(rs)
	integ, acct, evID, tenant, typ, sha, subj, msgID, reason, detail := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	seq := make([]int64, n)
	replayID, replayMode := make([]*string, n), make([]*string, n)
	recv := make([]*time.Time, n)
	origAcct, origID := make([]*string, n), make([]*string, n)
	for i, r := range rs {
		if o := r.Original; o != nil {
			a, id := recordable(o.Account), recordable(o.EventID)
			origAcct[i], origID[i] = &a, &id
		}
		integ[i], acct[i], evID[i] = recordable(r.Integration), recordable(r.Account), recordable(r.EventID)
		tenant[i], typ[i], sha[i], subj[i] = recordable(r.Tenant), recordable(r.EventType), recordable(r.PayloadSHA256), recordable(r.Subject)
		msgID[i], reason[i], detail[i], seq[i] = recordable(r.MsgID), r.Reason, recordable(r.Detail), r.StreamSeq
		if r.ReplayID != nil {
			v := recordable(*r.ReplayID)
			replayID[i] = &v
		}
		if r.ReplayMode != nil {
			v := recordable(*r.ReplayMode)
			replayMode[i] = &v
		}
		recv[i] = r.ReceivedAt
	}
	b.Queue(`INSERT INTO intake.rejected_messages (integration, account, event_id, tenant, event_type, payload_sha256,
			stream_seq, subject, msg_id, replay_id, replay_mode, reason, detail, received_at, original_account, original_event_id)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[],
			$8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::timestamptz[],
			$15::text[], $16::text[])
		ON CONFLICT (stream_seq, integration, account, event_id) DO NOTHING`,
		integ, acct, evID, tenant, typ, sha, seq, subj, msgID, replayID, replayMode, reason, detail, recv, origAcct, origID)
}

// maxRecorded bounds each recorded header value: a rejected message is
// whatever someone published, and its record must fit and never fail.
const maxRecorded = 1024

// recordable makes a value a text column takes: valid UTF-8 without NUL,
// at most maxRecorded bytes.
func recordable(s string) string {
	if len(s) > maxRecorded {
		s = s[:maxRecorded]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// RejectionFilter selects rejections for ListRejections. Zero fields do not
// filter.
type RejectionFilter struct {
	Integration string
	Tenant      string
	Reason      string
	ReplayID    string
	// Since and Until bound rejected_at: since ≤ t < until.
	Since, Until time.Time
	// FromSeq and ToSeq bound the message's INTAKE_IN sequence, inclusive;
	// 0 leaves that end open (reconcile's ranges).
	FromSeq, ToSeq uint64
	// KeyPrefix matches the start of the scoped key.
	KeyPrefix string
	// Limit caps the page. Defaults to 100; at most 1000.
	Limit int
	// Cursor continues after the last row of a previous page (NextCursor).
	Cursor string
}

const rejectionColumns = `r.id, r.integration, r.account, r.event_id, r.tenant, r.event_type, r.payload_sha256,
	r.stream_seq, r.subject, r.msg_id, r.replay_id, r.replay_mode, r.reason, r.detail, r.received_at, r.rejected_at,
	r.original_account, r.original_event_id`

func scanRejection(row pgx.CollectableRow) (Rejection, error) {
	var r Rejection
	var origAcct, origID *string
	err := row.Scan(&r.ID, &r.Integration, &r.Account, &r.EventID, &r.Tenant, &r.EventType, &r.PayloadSHA256,
		&r.StreamSeq, &r.Subject, &r.MsgID, &r.ReplayID, &r.ReplayMode, &r.Reason, &r.Detail, &r.ReceivedAt, &r.RejectedAt,
		&origAcct, &origID)
	r.Key = envelope.Key{Integration: r.Integration, Account: r.Account, EventID: r.EventID}.String()
	if origAcct != nil && origID != nil {
		r.Original = &envelope.Key{Integration: r.Integration, Account: *origAcct, EventID: *origID}
		r.OriginalKey = r.Original.String()
	}
	return r, err
}

// ListRejections returns one page of rejected messages, newest first, and
// the cursor of the next page ("" when this is the last).
func (s *Store) ListRejections(ctx context.Context, f RejectionFilter) ([]Rejection, string, error) {
	limit := pageLimit(f.Limit)
	var w conds
	w.eq("r.integration", f.Integration)
	w.eq("r.tenant", f.Tenant)
	w.eq("r.reason", f.Reason)
	w.eq("r.replay_id", f.ReplayID)
	w.between("r.rejected_at", f.Since, f.Until)
	if f.FromSeq > 0 {
		w.add("r.stream_seq >= " + w.arg(int64(f.FromSeq)))
	}
	if f.ToSeq > 0 {
		w.add("r.stream_seq <= " + w.arg(int64(f.ToSeq)))
	}
	w.keyPrefix("r.", f.KeyPrefix)
	if f.Cursor != "" {
		var id int64
		if err := decodeCursor(f.Cursor, &id); err != nil {
			return nil, "", err
		}
		w.add("r.id < " + w.arg(id))
	}
	q := `SELECT ` + rejectionColumns + ` FROM intake.rejected_messages r` + w.sql() + ` ORDER BY r.id DESC LIMIT ` + w.arg(limit+1)
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return nil, "", fmt.Errorf("store: list rejections: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanRejection)
	if err != nil {
		return nil, "", fmt.Errorf("store: list rejections: %w", err)
	}
	next := ""
	if len(list) > limit {
		list = list[:limit]
		next = encodeCursor(list[limit-1].ID)
	}
	return list, next, nil
}

// EventRejections lists the rejected messages that claimed an event's key,
// oldest first.
func (s *Store) EventRejections(ctx context.Context, k envelope.Key) ([]Rejection, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+rejectionColumns+` FROM intake.rejected_messages r
		WHERE r.integration = $1 AND r.account = $2 AND r.event_id = $3 ORDER BY r.id`, k.Integration, k.Account, k.EventID)
	if err != nil {
		return nil, fmt.Errorf("store: event rejections: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanRejection)
	if err != nil {
		return nil, fmt.Errorf("store: event rejections: %w", err)
	}
	return list, nil
}

// EventReplayedBodies lists the messages refused as replayed bodies of an
// event (RejectReplayedBody): its body under other ids, oldest first.
func (s *Store) EventReplayedBodies(ctx context.Context, k envelope.Key) ([]Rejection, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+rejectionColumns+` FROM intake.rejected_messages r
		WHERE r.integration = $1 AND r.original_account = $2 AND r.original_event_id = $3 ORDER BY r.id`,
		k.Integration, k.Account, k.EventID)
	if err != nil {
		return nil, fmt.Errorf("store: replayed bodies: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanRejection)
	if err != nil {
		return nil, fmt.Errorf("store: replayed bodies: %w", err)
	}
	return list, nil
}

// RejectedSeqs reports which of the INTAKE_IN sequences the processor
// recorded as rejected: they have no inbox row on purpose.
func (s *Store) RejectedSeqs(ctx context.Context, seqs []uint64) (map[uint64]bool, error) {
	out := map[uint64]bool{}
	if len(seqs) == 0 {
		return out, nil
	}
	in := make([]int64, len(seqs))
	for i, q := range seqs {
		in[i] = int64(q)
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT stream_seq FROM intake.rejected_messages WHERE stream_seq = ANY($1)`, in)
	if err != nil {
		return nil, fmt.Errorf("store: rejected sequences: %w", err)
	}
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&seq}, func() error {
		out[uint64(seq)] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: rejected sequences: %w", err)
	}
	return out, nil
}

// RefusedBody is where the message of a key the replay guard refused is:
// its INTAKE_IN sequence, as its rejection record says.
type RefusedBody struct {
	StreamSeq     uint64
	Tenant        string
	EventType     string
	PayloadSHA256 string
}

// RefusedBodies finds, for keys without an inbox row, the delivery the
// replay guard refused (reason replayed_body, not a replay's copy; the
// earliest if several): a replay by key locates such an event through it.
func (s *Store) RefusedBodies(ctx context.Context, keys []envelope.Key) (map[envelope.Key]RefusedBody, error) {
	out := map[envelope.Key]RefusedBody{}
	for start := 0; start < len(keys); start += keyChunk {
		integ, acct, id := keyColumns(keys[start:min(start+keyChunk, len(keys))])
		rows, err := s.pool.Query(ctx, `
			SELECT DISTINCT ON (r.integration, r.account, r.event_id)
				r.integration, r.account, r.event_id, r.stream_seq, r.tenant, r.event_type, r.payload_sha256
			FROM unnest($1::text[], $2::text[], $3::text[]) AS t(integration, account, event_id)
			JOIN intake.rejected_messages r USING (integration, account, event_id)
			WHERE r.reason = $4 AND r.replay_id IS NULL
			ORDER BY r.integration, r.account, r.event_id, r.stream_seq`, integ, acct, id, RejectReplayedBody)
		if err != nil {
			return nil, fmt.Errorf("store: refused bodies: %w", err)
		}
		var (
			k   envelope.Key
			b   RefusedBody
			seq int64
		)
		_, err = pgx.ForEachRow(rows, []any{&k.Integration, &k.Account, &k.EventID, &seq, &b.Tenant, &b.EventType, &b.PayloadSHA256}, func() error {
			b.StreamSeq = uint64(seq)
			out[k] = b
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("store: refused bodies: %w", err)
		}
	}
	return out, nil
}
