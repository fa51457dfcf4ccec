package envelope

import (
	"encoding/json"
	"fmt"
	"time"
)

// Receipts: ingress records every verified delivery it answered — also one
// the stream window stopped — on a subject without dedup; the processor folds
// them into the event's delivery history (intake.deliveries), which is what
// makes delivery_count the true count.
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
	r.Key = k
	if r.RetryHints == nil {
		r.RetryHints = map[string]string{}
	}
	return r, nil
}
