package apiclient

import (
	"context"
	"net/url"
	"time"
)

// MissingEvent is an accepted message whose event has no inbox row.
type MissingEvent struct {
	Key       string `json:"key"`
	StreamSeq uint64 `json:"stream_seq"`
}

// ReconcileResult is the answer of GET /api/v1/reconcile.
type ReconcileResult struct {
	// Shard is the replayer's processor.shard: the range was checked for
	// the shard's integrations only, against its durable's ack floor.
	Shard string `json:"shard,omitempty"`
	// Checked counts the ingress messages in the range (replay copies are
	// not deliveries and are skipped); a shard's replayer counts its
	// integrations' only (other shards' messages are not read).
	Checked int `json:"checked"`
	// Missing lists, once per key, messages acknowledged to the provider
	// (and acked by the processor) whose event has no inbox row.
	Missing []MissingEvent `json:"missing"`
	// Truncated is set when Missing was cut at its limit.
	Truncated bool `json:"truncated,omitempty"`
	// Pending counts messages without an inbox row that the processor has
	// not acknowledged yet: in flight, not missing.
	Pending int `json:"pending"`
	// Rejected counts messages without an inbox row that the processor
	// refused on purpose (GET /api/v1/rejections): not missing.
	Rejected int `json:"rejected"`
	// AckFloor is the processor consumer's ack floor (stream sequence; the
	// shard's durable for a shard's replayer):
	// every message up to it has been acked or terminated.
	AckFloor uint64 `json:"ack_floor"`
	// LastSeq is the stream's last sequence when the check started.
	LastSeq uint64 `json:"last_seq"`
	// Fix is the replay that would process the missing events (POST it to
	// /api/v1/replays, with "dry_run": false to start it).
	Fix *ReplayRequest `json:"fix,omitempty"`
	// LostConflicts lists conflicting deliveries the processor acknowledged
	// whose conflict record is gone (a commit lost in a Postgres failover).
	// A replay cannot bring them back (it runs the message the key's row
	// names); the re-drive writes the records itself.
	LostConflicts []MissingEvent `json:"lost_conflicts,omitempty"`
}

// ReconcileQuery is the INTAKE_IN range GET /api/v1/reconcile compares with
// the inbox: sequences FromSeq..ToSeq (0: open) and/or message times
// Since ≤ t < Until. It needs one of them.
type ReconcileQuery struct {
	FromSeq, ToSeq uint64
	Since, Until   time.Time
	Integration    string
}

// Reconcile is GET /api/v1/reconcile.
func (c *Client) Reconcile(ctx context.Context, q ReconcileQuery) (ReconcileResult, error) {
	v := query{}
	v.uint("from_seq", q.FromSeq)
	v.uint("to_seq", q.ToSeq)
	v.time("since", q.Since)
	v.time("until", q.Until)
	v.str("integration", q.Integration)
	var res ReconcileResult
	err := c.get(ctx, "/api/v1/reconcile", url.Values(v), &res)
	return res, err
}
