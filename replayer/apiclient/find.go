package apiclient

import (
	"context"
	"net/url"
)

// FindResult is GET /api/v1/find?q=: the events an operator's one string
// names, however they have it.
type FindResult struct {
	Query   string      `json:"query"`
	Matches []FindMatch `json:"matches"`
	// Searched says what q was read as, in order ("scoped key", "event id
	// in integration demo", "INTAKE_IN sequence 42", …), so that no match
	// says where nothing was found.
	Searched []string `json:"searched"`
}

// FindMatch is one event found, and how.
type FindMatch struct {
	// How q named it: key, event_id, stream_seq.
	How string `json:"how"`
	Key string `json:"key"`
	// Event is its inbox row, or its retrying state; absent when the
	// event is in INTAKE_IN but has neither yet (Note says so).
	Event *Event `json:"event,omitempty"`
	Note  string `json:"note,omitempty"`
}

// Find asks the replayer for the events q names.
func (c *Client) Find(ctx context.Context, q string) (FindResult, error) {
	var res FindResult
	err := c.get(ctx, "/api/v1/find", url.Values{"q": {q}}, &res)
	return res, err
}
