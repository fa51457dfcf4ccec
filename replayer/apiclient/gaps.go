package apiclient

import (
	"context"
	"time"
)

// Gaps is the result of one gap check (GET /api/v1/gaps): holes in
// INTAKE_IN, and events whose message vanished before the processor saw it.
type Gaps struct {
	CheckedAt time.Time `json:"checked_at"`
	Stream    string    `json:"stream"`
	FirstSeq  uint64    `json:"first_seq"`
	LastSeq   uint64    `json:"last_seq"`
	// Deleted counts sequences missing inside [FirstSeq, LastSeq];
	// DeletedSample lists some of them.
	Deleted       uint64   `json:"deleted"`
	DeletedSample []uint64 `json:"deleted_sample,omitempty"`
	// InboxMaxSeq is the highest stream sequence an inbox row records;
	// RolledBack counts the sequences past LastSeq up to it: messages the
	// processor saw that the stream no longer holds (or a stream recreated
	// under the same name).
	InboxMaxSeq uint64 `json:"inbox_max_seq"`
	RolledBack  uint64 `json:"rolled_back"`
	// ReceiptsWithoutEvent counts events of the last hour whose delivery
	// receipt says ingress answered "duplicate" — INTAKE_IN held their
	// message — received before the message at the processor's ack floor
	// was stored (so their message is settled), that have neither an
	// inbox row nor a rejection: their message vanished before the
	// processor saw it. ReceiptsSample names some of them.
	ReceiptsWithoutEvent uint64   `json:"receipts_without_event"`
	ReceiptsSample       []string `json:"receipts_sample,omitempty"`
}

// Found reports whether the check found a gap.
func (g Gaps) Found() bool { return g.Deleted > 0 || g.RolledBack > 0 || g.ReceiptsWithoutEvent > 0 }

// Gaps is GET /api/v1/gaps: a check now.
func (c *Client) Gaps(ctx context.Context) (Gaps, error) {
	var g Gaps
	err := c.get(ctx, "/api/v1/gaps", nil, &g)
	return g, err
}
