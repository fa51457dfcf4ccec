package apiclient

import (
	"context"
	"net/url"
	"time"
)

// Conflict is a delivery with an event's key and another payload: both
// hashes, both stream sequences, when it arrived and when the processor saw
// it.
type Conflict struct {
	ID                   int64     `json:"id"`
	Key                  string    `json:"key"`
	Integration          string    `json:"integration"`
	Account              string    `json:"account"`
	EventID              string    `json:"event_id"`
	Tenant               string    `json:"tenant"`
	OriginalSHA256       string    `json:"original_sha256"`
	ConflictingSHA256    string    `json:"conflicting_sha256"`
	OriginalStreamSeq    int64     `json:"original_stream_seq"`
	ConflictingStreamSeq int64     `json:"conflicting_stream_seq"`
	ReceivedAt           time.Time `json:"received_at"`
	DetectedAt           time.Time `json:"detected_at"`
}

// ConflictPage is GET /api/v1/conflicts, newest first.
type ConflictPage struct {
	Conflicts  []Conflict `json:"conflicts"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// ConflictQuery filters GET /api/v1/conflicts; zero fields do not filter.
type ConflictQuery struct {
	Integration, Tenant string
	// Since and Until bound the detection: since ≤ t < until.
	Since, Until time.Time
	KeyPrefix    string
	Limit        int // rows per page; 0 takes the API's default (100), at most 1000
	Cursor       string
}

// Conflicts is GET /api/v1/conflicts.
func (c *Client) Conflicts(ctx context.Context, q ConflictQuery) (ConflictPage, error) {
	v := query{}
	v.str("integration", q.Integration)
	v.str("tenant", q.Tenant)
	v.time("since", q.Since)
	v.time("until", q.Until)
	v.str("key_prefix", q.KeyPrefix)
	v.int("limit", q.Limit)
	v.str("cursor", q.Cursor)
	var page ConflictPage
	err := c.get(ctx, "/api/v1/conflicts", url.Values(v), &page)
	return page, err
}
