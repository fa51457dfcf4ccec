package apiclient

import (
	"context"
	"time"
)

// Status is GET /api/v1/status: health at a glance, the figures of
// `intake status` and the console's overview header.
type Status struct {
	At time.Time `json:"at"`
	// Window is what the per-integration counts cover: the last hour.
	Window string       `json:"window"`
	Stream StreamStatus `json:"stream"`
	// Integrations are the configured ones (and any other the inbox holds
	// rows of in the window), by name.
	Integrations []IntegrationStatus `json:"integrations"`
}

// StreamStatus is INTAKE_IN as the processors' durable sees it.
type StreamStatus struct {
	Durable string `json:"durable"`
	// Pending are stored messages not yet delivered to a processor;
	// AckPending those delivered and not yet acknowledged (in a batch, or
	// waiting out a retry's backoff).
	Pending    uint64 `json:"pending"`
	AckPending int    `json:"ack_pending"`
	AckFloor   uint64 `json:"ack_floor"`
	Delivered  uint64 `json:"delivered"` // the last stream sequence delivered to a processor
	// OldestUnprocessedAt is when the oldest message past the ack floor
	// was stored (null when none waits); OldestAgeSeconds its age.
	OldestUnprocessedAt *time.Time `json:"oldest_unprocessed_at"`
	OldestAgeSeconds    float64    `json:"oldest_age_seconds"`
	// OldestByIntegration is each integration's oldest message past the
	// ack floor, BacklogByIntegration how many of its messages are past it
	// (IntegrationStatus carries them); not in the JSON here.
	OldestByIntegration  map[string]time.Time `json:"-"`
	BacklogByIntegration map[string]uint64    `json:"-"`
}

// IntegrationStatus is one integration over the status window.
type IntegrationStatus struct {
	Name string `json:"name"`
	// Accepted events first received in the window, and per second.
	Accepted  int64   `json:"accepted"`
	PerSecond float64 `json:"per_second"`
	// Duplicates are the window's extra deliveries of those events.
	Duplicates int64 `json:"duplicates"`
	// Failed and Quarantined: inbox rows by their last delivery in the
	// window; Retrying: events waiting for their next attempt, now.
	Failed      int64 `json:"failed"`
	Quarantined int64 `json:"quarantined"`
	Retrying    int64 `json:"retrying"`
	// LagP50 and LagP95: first receipt to processed, replays left out.
	LagP50 string `json:"lag_p50"`
	LagP95 string `json:"lag_p95"`
	// Refused is how many requests ingress refused in the window (401 bad
	// signature, 413 too large, 429 rate limited, 503 busy or the stream
	// away, 400 malformed); Refusals the same by status code and reason,
	// the most first. Ingress sends its counts every 10 s, so the last
	// seconds are not in them yet.
	// OldestUnprocessedAt is when the integration's oldest INTAKE_IN
	// message past the processors' ack floor was stored (null when none
	// waits: its backlog is empty); OldestAgeSeconds its age. Backlog is
	// how many of its messages are past the ack floor (undelivered, in a
	// batch or waiting out a retry; one acknowledged out of order above
	// the floor counts too): 0 when none waits, null when it could not be
	// counted (every scan slot busy). NATS counts a durable's backlog
	// (Status.Stream), not a subject's: this is counted by a scan slot's
	// consumer on the integration's subjects from the ack floor on.
	OldestUnprocessedAt *time.Time `json:"oldest_unprocessed_at"`
	OldestAgeSeconds    float64    `json:"oldest_age_seconds"`
	Backlog             *uint64    `json:"backlog"`
	Refused             int64      `json:"refused"`
	Refusals            []Refusal  `json:"refusals"`
}

// Refusal is one status code and reason's count of refused requests.
type Refusal struct {
	StatusCode int    `json:"status_code"`
	Reason     string `json:"reason"`
	Count      int64  `json:"count"`
}

// Status reads GET /api/v1/status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	err := c.get(ctx, "/api/v1/status", nil, &s)
	return s, err
}
