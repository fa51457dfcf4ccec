package apiclient

import (
	"context"
	"net/url"
	"strconv"
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

// ConflictDiff is GET /api/v1/conflicts/diff?key=&id=: one conflict with
// both payloads from INTAKE_IN and, when both are JSON, the fields that
// differ (objects compared by key, so a moved field is not a change).
type ConflictDiff struct {
	Conflict    Conflict        `json:"conflict"`
	Original    ConflictPayload `json:"original"`
	Conflicting ConflictPayload `json:"conflicting"`
	Structural  bool            `json:"structural"` // both JSON: Fields holds every differing path (at most 200)
	Fields      []FieldChange   `json:"fields"`
}

// ConflictPayload is one side of a conflict: the body as stored, or why it
// is not there (the stream has dropped it).
type ConflictPayload struct {
	StreamSeq int64  `json:"stream_seq"`
	SHA256    string `json:"sha256"`
	Body      string `json:"body,omitempty"`
	JSON      bool   `json:"json"`
	Missing   string `json:"missing,omitempty"`
}

// FieldChange is one JSON path whose value differs: op change, add (the
// conflicting side only) or del (the original only); values as compact JSON.
type FieldChange struct {
	Path  string `json:"path"`
	Op    string `json:"op"`
	Left  string `json:"left,omitempty"`
	Right string `json:"right,omitempty"`
}

// ConflictDiff reads GET /api/v1/conflicts/diff for key's conflict id.
func (c *Client) ConflictDiff(ctx context.Context, key string, id int64) (ConflictDiff, error) {
	var d ConflictDiff
	err := c.get(ctx, "/api/v1/conflicts/diff", url.Values{"key": {key}, "id": {strconv.FormatInt(id, 10)}}, &d)
	return d, err
}
