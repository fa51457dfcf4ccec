package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Destination is one HTTP destination of the config as operators see it
// (GET /api/v1/destinations): its state, its backlog in INTAKE_OUT, and
// what its delivery log says over the window.
type Destination struct {
	Name string `json:"name"`
	// URL is the destination's URL without its query (which may hold a
	// token).
	URL   string           `json:"url"`
	Match DestinationMatch `json:"match"`
	// State is healthy, failing (a dispatcher's circuit breaker is open, or
	// most of the window's attempts were not delivered) or paused (by an
	// operator).
	State        string     `json:"state"`
	Paused       bool       `json:"paused"`
	PausedBy     *string    `json:"paused_by"`
	PausedReason *string    `json:"paused_reason"`
	PausedAt     *time.Time `json:"paused_at"`
	CircuitOpen  bool       `json:"circuit_open"`
	// CircuitChangedAt is when a dispatcher last opened or closed its
	// breaker.
	CircuitChangedAt *time.Time `json:"circuit_changed_at"`
	// Backlog is the messages waiting for the destination (not delivered
	// yet, or waiting out a retry); null when its consumer could not be
	// read (no dispatcher has created it yet, or NATS did not answer).
	Backlog *uint64 `json:"backlog"`
	// OldestUndeliveredAgeSeconds is the age of the oldest of them; 0 when
	// none waits, null with Backlog.
	OldestUndeliveredAgeSeconds *float64 `json:"oldest_undelivered_age_seconds"`
	// Window is how far back the counts below look ("15m").
	Window    string `json:"window"`
	Attempts  int64  `json:"attempts"`
	Delivered int64  `json:"delivered"`
	Retried   int64  `json:"retried"`
	Failed    int64  `json:"failed"`
	// SuccessRate is Delivered / Attempts; null without attempts.
	SuccessRate *float64     `json:"success_rate"`
	LastAttempt *LastAttempt `json:"last_attempt"` // in the window; null without one
}

// LastAttempt is what a destination's newest attempt got.
type LastAttempt struct {
	Outcome     string    `json:"outcome"`
	StatusCode  *int      `json:"status_code"` // null: no answer
	ErrorClass  string    `json:"error_class"`
	AttemptedAt time.Time `json:"attempted_at"`
}

// DestinationMatch is a destination's match (empty lists match any).
type DestinationMatch struct {
	Tenants      []string `json:"tenants"`
	Integrations []string `json:"integrations"`
	Types        []string `json:"types"`
}

// DestinationList is GET /api/v1/destinations.
type DestinationList struct {
	Destinations []Destination `json:"destinations"`
}

// DestinationDetail is GET /api/v1/destinations/{name}: the destination,
// its newest attempts and the operators' pauses and resumes.
type DestinationDetail struct {
	Destination
	RecentAttempts []DispatchAttempt   `json:"recent_attempts"`
	Actions        []DestinationAction `json:"actions"`
}

// DispatchAttempt is one attempt to deliver a processed message to a
// destination (intake.dispatch_attempts).
type DispatchAttempt struct {
	Destination string `json:"destination"`
	// WebhookID is the delivery's webhook-id: the INTAKE_OUT message id.
	WebhookID   string `json:"webhook_id"`
	Key         string `json:"key"`
	Integration string `json:"integration"`
	Tenant      string `json:"tenant"`
	EventType   string `json:"event_type"`
	StreamSeq   uint64 `json:"stream_seq"` // in INTAKE_OUT
	Attempt     int    `json:"attempt"`
	// Outcome is delivered, retry or failed.
	Outcome    string `json:"outcome"`
	StatusCode *int   `json:"status_code"` // null: no answer
	// ErrorClass is "" when delivered, else timeout, connect, tls,
	// connection, redirect, client_error, rate_limited, server_error or
	// status.
	ErrorClass    string     `json:"error_class"`
	LatencyMS     int64      `json:"latency_ms"`
	Response      string     `json:"response"` // the answer's first 1 KiB
	AttemptedAt   time.Time  `json:"attempted_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at"` // outcome retry only
}

// DispatchAttemptPage is GET /api/v1/destinations/{name}/attempts.
type DispatchAttemptPage struct {
	Attempts   []DispatchAttempt `json:"attempts"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

// DestinationAction is an operator's pause or resume of a destination.
type DestinationAction struct {
	Action      string    `json:"action"` // pause, resume
	RequestedBy string    `json:"requested_by"`
	Reason      string    `json:"reason"`
	At          time.Time `json:"at"`
}

// PauseRequest is the body of POST /api/v1/destinations/{name}/pause and
// /resume.
type PauseRequest struct {
	Reason string `json:"reason"` // required to pause
}

// DispatchQuery filters and pages a destination's attempts; zero fields
// do not filter.
type DispatchQuery struct {
	Outcome      string // delivered, retry, failed
	Key          string
	Since, Until time.Time
	Limit        int
	Cursor       string
}

// Destinations lists the configured destinations with their state; window
// ("15m", "1h"; "" for the API's default) bounds the counts.
func (c *Client) Destinations(ctx context.Context, window string) (DestinationList, error) {
	q := query{}
	q.str("window", window)
	var l DestinationList
	err := c.get(ctx, "/api/v1/destinations", url.Values(q), &l)
	return l, err
}

// Destination is one destination with its newest attempts and actions.
func (c *Client) Destination(ctx context.Context, name, window string) (DestinationDetail, error) {
	q := query{}
	q.str("window", window)
	var d DestinationDetail
	err := c.get(ctx, "/api/v1/destinations/"+url.PathEscape(name), url.Values(q), &d)
	return d, err
}

// DestinationAttempts pages a destination's delivery log, newest first.
func (c *Client) DestinationAttempts(ctx context.Context, name string, dq DispatchQuery) (DispatchAttemptPage, error) {
	q := query{}
	q.str("outcome", dq.Outcome)
	q.str("key", dq.Key)
	q.time("since", dq.Since)
	q.time("until", dq.Until)
	q.int("limit", dq.Limit)
	q.str("cursor", dq.Cursor)
	var p DispatchAttemptPage
	err := c.get(ctx, "/api/v1/destinations/"+url.PathEscape(name)+"/attempts", url.Values(q), &p)
	return p, err
}

// PauseDestination stops deliveries to name on every dispatcher (pause) or
// lets them go again (resume), audited with reason.
func (c *Client) PauseDestination(ctx context.Context, name string, pause bool, reason string) (Destination, error) {
	action := "resume"
	if pause {
		action = "pause"
	}
	var d Destination
	_, err := c.Do(ctx, http.MethodPost, "/api/v1/destinations/"+url.PathEscape(name)+"/"+action, PauseRequest{Reason: reason}, &d)
	return d, err
}
