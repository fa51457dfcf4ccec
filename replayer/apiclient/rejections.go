package apiclient

import (
	"context"
	"net/url"
	"time"
)

// Rejection is a message the processor refused before the inbox decision,
// with what it claimed (key, tenant, replay) and why it was refused.
type Rejection struct {
	ID            int64      `json:"id"`
	Key           string     `json:"key"`
	Integration   string     `json:"integration"`
	Account       string     `json:"account"`
	EventID       string     `json:"event_id"`
	Tenant        string     `json:"tenant"`
	EventType     string     `json:"event_type"`
	PayloadSHA256 string     `json:"payload_sha256"`
	StreamSeq     int64      `json:"stream_seq"`
	Subject       string     `json:"subject"`
	MsgID         string     `json:"msg_id"`
	ReplayID      *string    `json:"replay_id"`
	ReplayMode    *string    `json:"replay_mode"`
	Reason        string     `json:"reason"` // docs/contract.md lists them
	Detail        string     `json:"detail"`
	ReceivedAt    *time.Time `json:"received_at"`
	RejectedAt    time.Time  `json:"rejected_at"`
	// OriginalKey is, for a replayed body (reason replayed_body), the key of
	// the event whose body the message carries.
	OriginalKey string `json:"original_key,omitempty"`
}

// RejectionPage is GET /api/v1/rejections, newest first.
type RejectionPage struct {
	Rejections []Rejection `json:"rejections"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// RejectionQuery filters GET /api/v1/rejections; zero fields do not filter.
type RejectionQuery struct {
	Integration, Tenant, Reason string
	ReplayID                    string // the replay the messages claimed
	// Since and Until bound the rejection: since ≤ t < until.
	Since, Until time.Time
	// FromSeq and ToSeq bound the message's INTAKE_IN sequence, inclusive
	// (0: open), as a reconcile's range does.
	FromSeq, ToSeq uint64
	KeyPrefix      string
	Limit          int // rows per page; 0 takes the API's default (100), at most 1000
	Cursor         string
}

// Rejections is GET /api/v1/rejections.
func (c *Client) Rejections(ctx context.Context, q RejectionQuery) (RejectionPage, error) {
	v := query{}
	v.str("integration", q.Integration)
	v.str("tenant", q.Tenant)
	v.str("reason", q.Reason)
	v.str("replay_id", q.ReplayID)
	v.time("since", q.Since)
	v.time("until", q.Until)
	v.uint("from_seq", q.FromSeq)
	v.uint("to_seq", q.ToSeq)
	v.str("key_prefix", q.KeyPrefix)
	v.int("limit", q.Limit)
	v.str("cursor", q.Cursor)
	var page RejectionPage
	err := c.get(ctx, "/api/v1/rejections", url.Values(v), &page)
	return page, err
}
