package envelope

import (
	"encoding/json"
	"fmt"
	"time"
)

// Refusal summaries: ingress counts the requests it refused (401 bad
// signature, 413 too large, 429 rate limited, 503 busy, 400 malformed…) per
// integration, status code and reason, and every RefusalFlushInterval sends
// what it counted as one summary per integration on the integration's
// receipt subject, marked with HeaderReceiptKind. The receipt folder stores
// them (intake.ingress_refusals) for the overview and `intake status`. Like
// receipts they are core NATS publishes: a summary lost to a NATS failure
// undercounts the overview; the Prometheus counter
// (intake_ingress_rejected_total) stays exact.
const (
	// HeaderReceiptKind marks a message on a receipt subject that is not
	// a receipt; its value names the kind.
	HeaderReceiptKind = "Intake-Receipt-Kind"
	// ReceiptKindRefusals is a RefusalSummary.
	ReceiptKindRefusals = "refusals"
	// RefusalFlushInterval is how often ingress sends its summaries.
	RefusalFlushInterval = 10 * time.Second
	// MaxRefusalCounts bounds a summary's counts: reasons are ingress's
	// own constants, so a genuine summary holds a few.
	MaxRefusalCounts = 64
)

// RefusalSummary is one ingress instance's refusals of one integration
// over [WindowStart, WindowEnd).
type RefusalSummary struct {
	ID          string         `json:"id"` // unique per summary; makes the fold idempotent
	Integration string         `json:"integration"`
	Instance    string         `json:"instance"`
	WindowStart time.Time      `json:"window_start"`
	WindowEnd   time.Time      `json:"window_end"`
	Counts      []RefusalCount `json:"counts"`
}

// RefusalCount is how many requests were refused with one status code and
// reason.
type RefusalCount struct {
	StatusCode int    `json:"status_code"`
	Reason     string `json:"reason"`
	Count      int64  `json:"count"`
}

// MarshalRefusalSummary encodes s.
func MarshalRefusalSummary(s RefusalSummary) ([]byte, error) { return json.Marshal(s) }

// ParseRefusalSummary decodes a summary and validates what the fold
// stores: whoever may publish receipts writes these values.
func ParseRefusalSummary(b []byte) (RefusalSummary, error) {
	var s RefusalSummary
	if err := json.Unmarshal(b, &s); err != nil {
		return RefusalSummary{}, fmt.Errorf("refusal summary: %w", err)
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"id", s.ID, 128}, {"integration", s.Integration, 256}, {"instance", s.Instance, 256}} {
		if err := CheckText(f.name, f.v, f.max, f.name != "instance"); err != nil {
			return RefusalSummary{}, fmt.Errorf("refusal summary: %w", err)
		}
	}
	if s.WindowStart.IsZero() || s.WindowEnd.Before(s.WindowStart) {
		return RefusalSummary{}, fmt.Errorf("refusal summary: window %s to %s", s.WindowStart, s.WindowEnd)
	}
	if len(s.Counts) == 0 || len(s.Counts) > MaxRefusalCounts {
		return RefusalSummary{}, fmt.Errorf("refusal summary: %d counts, 1 to %d", len(s.Counts), MaxRefusalCounts)
	}
	for _, c := range s.Counts {
		if c.StatusCode < 400 || c.StatusCode > 599 {
			return RefusalSummary{}, fmt.Errorf("refusal summary: status code %d", c.StatusCode)
		}
		if c.Count < 1 {
			return RefusalSummary{}, fmt.Errorf("refusal summary: count %d", c.Count)
		}
		if err := CheckText("reason", c.Reason, 64, true); err != nil {
			return RefusalSummary{}, fmt.Errorf("refusal summary: %w", err)
		}
	}
	return s, nil
}
