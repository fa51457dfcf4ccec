package envelope

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Receipts: every verified delivery ingress answered enters the event's
// delivery history (intake.deliveries), which is what makes delivery_count
// the true count. A delivery that became a stream message (accepted) enters
// it from that message, in the processor's batch transaction. One that did
// not — the stream window stopped it (duplicate) or the stream was away
// (unavailable) — is sent as a receipt on a subject without dedup, and the
// processor folds receipts in batches.
const (
	StreamReceipts     = "INTAKE_RECEIPTS"
	SubjectReceiptsAll = "intake.receipts.>"
	ConsumerReceipts   = "receipts"
)

// SubjectReceipt is the receipt subject of an integration.
func SubjectReceipt(integration string) string { return "intake.receipts." + Token(integration) }

// Receipt is one answered delivery.
type Receipt struct {
	ID         string            `json:"id"` // unique per receipt; makes the fold idempotent
	Key        Key               `json:"-"`
	KeyString  string            `json:"key"`
	ReceivedAt time.Time         `json:"received_at"`
	Instance   string            `json:"instance"`
	StatusCode int               `json:"status_code"`
	Answer     string            `json:"answer"` // accepted, duplicate, unavailable
	RetryHints map[string]string `json:"retry_hints,omitempty"`
}

// StreamReceiptID is the delivery-history id of the delivery that became
// INTAKE_IN message seq: idempotent across redeliveries of that message.
func StreamReceiptID(seq uint64) string { return "in:" + strconv.FormatUint(seq, 10) }

// RetryHints picks the provider's retry headers out of a request's headers.
func RetryHints(h map[string][]string) map[string]string {
	var out map[string]string
	for _, name := range RetryHintHeaders {
		if v := h[name]; len(v) > 0 && v[0] != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = v[0]
		}
	}
	return CleanRetryHints(out)
}

// Bounds of retry hints: informational, so what exceeds them is cut or
// dropped rather than refused.
const (
	maxRetryHints     = 8
	maxRetryHintBytes = 256
)

// CleanRetryHints keeps at most maxRetryHints hints whose names are
// printable text, each value cut to maxRetryHintBytes with control
// characters replaced: the publisher of a delivery or receipt writes them,
// and a NUL or an invalid byte would make Postgres refuse the whole fold.
func CleanRetryHints(h map[string]string) map[string]string {
	if len(h) == 0 {
		return h
	}
	out := make(map[string]string, min(len(h), maxRetryHints))
	for k, v := range h {
		if len(out) == maxRetryHints {
			break
		}
		if CheckText("retry hint name", k, 64, true) != nil {
			continue
		}
		if len(v) > maxRetryHintBytes {
			v = v[:maxRetryHintBytes]
		}
		out[k] = CleanType(v)
	}
	return out
}

// RetryHintHeaders are provider headers that say a delivery is a retry;
// receipts keep them so operators see retries before pressing "Resend".
var RetryHintHeaders = []string{"X-Slack-Retry-Num", "X-Slack-Retry-Reason"}

// MarshalReceipt encodes r.
func MarshalReceipt(r Receipt) ([]byte, error) {
	r.KeyString = r.Key.String()
	return json.Marshal(r)
}

// ParseReceipt decodes a receipt and validates its key.
func ParseReceipt(b []byte) (Receipt, error) {
	var r Receipt
	if err := json.Unmarshal(b, &r); err != nil {
		return Receipt{}, fmt.Errorf("receipt: %w", err)
	}
	k, ok := ParseKey(r.KeyString)
	if !ok || r.ID == "" {
		return Receipt{}, fmt.Errorf("receipt: missing id or key")
	}
	// Whoever may publish receipts writes these values; a value Postgres
	// would refuse (invalid UTF-8, NUL) must not reach the fold's batch.
	if err := k.Validate(); err != nil {
		return Receipt{}, fmt.Errorf("receipt: key: %w", err)
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"id", r.ID, 128}, {"instance", r.Instance, 256}, {"answer", r.Answer, 64}} {
		if err := CheckText(f.name, f.v, f.max, false); err != nil {
			return Receipt{}, fmt.Errorf("receipt: %w", err)
		}
	}
	r.RetryHints = CleanRetryHints(r.RetryHints)
	r.Key = k
	if r.RetryHints == nil {
		r.RetryHints = map[string]string{}
	}
	return r, nil
}
