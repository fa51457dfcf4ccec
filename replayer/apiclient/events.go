package apiclient

import (
	"context"
	"net/url"
	"time"

	"github.com/intakehq/intake/pkg/inbox"
)

// Event is an inbox row: GET /api/v1/events lists them, the event detail
// starts with one.
type Event struct {
	Key             string       `json:"key"` // {integration}/{account}/{event_id}
	Integration     string       `json:"integration"`
	Account         string       `json:"account"`
	EventID         string       `json:"event_id"`
	Tenant          string       `json:"tenant"`
	EventType       string       `json:"event_type"`
	Status          inbox.Status `json:"status"`
	PayloadSHA256   string       `json:"payload_sha256"`
	DeliveryCount   int          `json:"delivery_count"`
	Attempts        int          `json:"attempts"`
	StreamSeq       int64        `json:"stream_seq"`
	FirstReceivedAt time.Time    `json:"first_received_at"`
	LastReceivedAt  time.Time    `json:"last_received_at"`
	ProcessedAt     *time.Time   `json:"processed_at"`
	Error           *string      `json:"error"`
	Conflicts       int          `json:"conflicts"` // the count; the detail lists the records
	// A retrying event (status "retrying": its handler failed, the
	// processor tries again at next_attempt_at; no inbox row yet) is
	// attempt "attempts" of "max_deliver". Absent for inbox rows.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	MaxDeliver    int        `json:"max_deliver,omitempty"`
}

// EventPage is GET /api/v1/events: inbox rows, newest first.
type EventPage struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// EventDetail is GET /api/v1/events/{integration}/{event_id}: the inbox row
// and everything that happened to the event. "conflicts" stays the count
// (as in lists); the records are in "conflict_records".
type EventDetail struct {
	Event
	ConflictRecords []Conflict        `json:"conflict_records"`
	Deliveries      []Delivery        `json:"deliveries"`
	Executions      []ExecutionRecord `json:"executions"`
	Replays         []ReplayRef       `json:"replays"`
	// Rejections are messages claiming this event's key that the processor
	// refused (see GET /api/v1/rejections).
	Rejections []Rejection `json:"rejections"`
	// ReplayedBodies are messages that carried this event's body under
	// another event id and were refused by the replay guard (reason
	// replayed_body; GET /api/v1/rejections?reason=replayed_body lists all).
	ReplayedBodies []Rejection `json:"replayed_bodies"`
	// HandlerAttempts are the event's failed handler runs, oldest first:
	// while it retries (status "retrying") and after, as its history.
	HandlerAttempts []HandlerAttempt `json:"handler_attempts"`
	// DispatchAttempts are the attempts to deliver the event's processed
	// messages to HTTP destinations, oldest first.
	DispatchAttempts []DispatchAttempt `json:"dispatch_attempts"`
}

// HandlerAttempt is one failed handler run of an event.
type HandlerAttempt struct {
	StreamSeq  int64  `json:"stream_seq"`
	Delivery   int    `json:"delivery"`    // attempt n …
	MaxDeliver int    `json:"max_deliver"` // … of processor.max_deliver
	Handler    string `json:"handler,omitempty"`
	// ErrorClass: permanent, quarantine, timeout, "sql <SQLSTATE>", error.
	ErrorClass    string     `json:"error_class"`
	Error         string     `json:"error"`
	FailedAt      time.Time  `json:"failed_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at"` // null: the last attempt
}

// Delivery is one verified delivery of an event that ingress answered: the
// event's delivery history.
type Delivery struct {
	ReceiptID  string            `json:"receipt_id"`
	ReceivedAt time.Time         `json:"received_at"`
	Instance   string            `json:"instance"` // the ingress instance that answered
	StatusCode int               `json:"status_code"`
	Answer     string            `json:"answer"`
	RetryHints map[string]string `json:"retry_hints,omitempty"` // the provider's retry headers
}

// ExecutionRecord is one handler run of an event.
type ExecutionRecord struct {
	ID         string    `json:"id"`
	Mode       string    `json:"mode"` // original, retry or reexecute
	ReplayID   *string   `json:"replay_id"`
	StreamSeq  int64     `json:"stream_seq"`
	ExecutedAt time.Time `json:"executed_at"`
}

// ReplayRef is a replay (or redelivery) that selected one event, with what
// became of the event in it.
type ReplayRef struct {
	ID           string    `json:"id"`
	Mode         string    `json:"mode"`
	State        string    `json:"state"`
	RequestedBy  string    `json:"requested_by"`
	Reason       string    `json:"reason"`
	CreatedAt    time.Time `json:"created_at"`
	ItemState    string    `json:"item_state"` // pending, published or missing
	PublishedSeq *int64    `json:"published_seq"`
}

// EventQuery filters GET /api/v1/events; zero fields do not filter.
type EventQuery struct {
	Integration, Tenant, EventType string
	Status                         string // processed, stale, failed, quarantined, or retrying (no inbox row yet)
	// Since and Until bound the first receipt: since ≤ t < until.
	Since, Until time.Time
	KeyPrefix    string // the start of the scoped key
	Limit        int    // rows per page; 0 takes the API's default (100), at most 1000
	Cursor       string // a previous page's NextCursor
}

// Events is GET /api/v1/events.
func (c *Client) Events(ctx context.Context, q EventQuery) (EventPage, error) {
	v := query{}
	v.str("integration", q.Integration)
	v.str("tenant", q.Tenant)
	v.str("event_type", q.EventType)
	v.str("status", q.Status)
	v.time("since", q.Since)
	v.time("until", q.Until)
	v.str("key_prefix", q.KeyPrefix)
	v.int("limit", q.Limit)
	v.str("cursor", q.Cursor)
	var page EventPage
	err := c.get(ctx, "/api/v1/events", url.Values(v), &page)
	return page, err
}

// Event is GET /api/v1/events/{integration}/{event_id}, the API choosing
// the account: an integration has one account scope unless a verified
// header supplies it.
func (c *Client) Event(ctx context.Context, integration, eventID string) (EventDetail, error) {
	var d EventDetail
	err := c.get(ctx, eventPath(integration, eventID), nil, &d)
	return d, err
}

// EventInAccount is Event for the scoped key
// {integration}/{account}/{event_id} (?account=; the account may be empty).
func (c *Client) EventInAccount(ctx context.Context, integration, account, eventID string) (EventDetail, error) {
	var d EventDetail
	err := c.get(ctx, eventPath(integration, eventID), url.Values{"account": {account}}, &d)
	return d, err
}

func eventPath(integration, eventID string) string {
	return "/api/v1/events/" + url.PathEscape(integration) + "/" + url.PathEscape(eventID)
}
