package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// FailureGroup is failed (or quarantined) events that share one cause: an
// integration, a status, the error class of their last attempt and the
// error's signature (its text with numbers and UUIDs masked).
type FailureGroup struct {
	ID          string     `json:"id"`
	Integration string     `json:"integration"`
	Status      string     `json:"status"`
	ErrorClass  string     `json:"error_class"`
	Signature   string     `json:"signature"`
	Events      int64      `json:"events"`
	FirstSeen   time.Time  `json:"first_seen"` // the earliest last delivery among them
	LastSeen    time.Time  `json:"last_seen"`
	SampleKeys  []string   `json:"sample_keys"`
	Resolved    bool       `json:"resolved"` // resolved, and no event of it failed since
	ResolvedBy  *string    `json:"resolved_by"`
	ResolvedAt  *time.Time `json:"resolved_at"`
	Note        *string    `json:"note"`
}

// FailureGroupList is GET /api/v1/failures.
type FailureGroupList struct {
	Groups []FailureGroup `json:"groups"`
}

// ResolveRequest is POST /api/v1/failures/{id}/resolve's body.
type ResolveRequest struct {
	Note string `json:"note"` // required: what was done, or why nothing needs to be
}

// FailureGroups lists the groups (resolved ones too with all).
func (c *Client) FailureGroups(ctx context.Context, integration string, all bool) (FailureGroupList, error) {
	q := url.Values{}
	if integration != "" {
		q.Set("integration", integration)
	}
	if all {
		q.Set("all", "true")
	}
	var l FailureGroupList
	err := c.get(ctx, "/api/v1/failures", q, &l)
	return l, err
}

// ResolveFailureGroup records that an operator dealt with group id.
func (c *Client) ResolveFailureGroup(ctx context.Context, id, note string) (FailureGroup, error) {
	var g FailureGroup
	_, err := c.Do(ctx, http.MethodPost, "/api/v1/failures/"+url.PathEscape(id)+"/resolve", ResolveRequest{Note: note}, &g)
	return g, err
}
