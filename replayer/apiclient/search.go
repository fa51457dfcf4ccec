package apiclient

import (
	"context"
	"net/url"
	"time"
)

// SearchQuery is GET /api/v1/search: the INTAKE_IN messages of a time
// window whose JSON payload has Value at Path.
type SearchQuery struct {
	// Path is a dotted JSON path into the payload, array positions as
	// numbers: "data.object.customer", "items.0.sku".
	Path string
	// Value matches a string field equal to it, or a number, boolean or
	// null whose JSON text it is ("4200", "true").
	Value       string
	Integration string
	// Since and Until bound the messages' stored time; Since defaults to
	// an hour before Until (now), and the window is at most
	// api.payload_search.max_window.
	Since, Until time.Time
}

// SearchResult is GET /api/v1/search's answer.
type SearchResult struct {
	Path    string        `json:"path"`
	Since   time.Time     `json:"since"`
	Until   time.Time     `json:"until"`
	Scanned int           `json:"scanned"`
	Matches []SearchMatch `json:"matches"`
	// Truncated: the search stopped at api.payload_search.max_messages
	// messages read, or at 100 matches; narrow the window.
	Truncated bool `json:"truncated"`
}

// SearchMatch is one message whose payload matched.
type SearchMatch struct {
	Key       string    `json:"key"`
	StreamSeq uint64    `json:"stream_seq"`
	StoredAt  time.Time `json:"stored_at"`
	EventType string    `json:"event_type"`
}

// Search reads GET /api/v1/search.
func (c *Client) Search(ctx context.Context, q SearchQuery) (SearchResult, error) {
	v := url.Values{"path": {q.Path}, "value": {q.Value}}
	if q.Integration != "" {
		v.Set("integration", q.Integration)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.Format(time.RFC3339Nano))
	}
	var res SearchResult
	err := c.get(ctx, "/api/v1/search", v, &res)
	return res, err
}
