package envelope

import (
	"encoding/json"
	"fmt"
	"sort"
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
	Answer     Answer            `json:"answer"` // accepted, duplicate, unavailable
	RetryHints map[string]string `json:"retry_hints,omitempty"`
}

// StreamReceiptID is the delivery-history id of the delivery that became
// INTAKE_IN message seq: idempotent across redeliveries of that message.
func StreamReceiptID(seq uint64) string { return "in:" + strconv.FormatUint(seq, 10) }

// Retry hints are a provider's headers that say a delivery is a retry
// (Slack's X-Slack-Retry-Num and X-Slack-Retry-Reason); the delivery history
// keeps them so operators see retries before pressing "Resend". They are not
// signed and they are stored, so only the verifier of their provider reads
// them (provider.Identity.RetryHints), and they are bounded here, also when
// read back from a message or receipt anyone allowed to publish could write.
const (
	// MaxRetryHints bounds the number of hints kept per delivery.
	MaxRetryHints = 4
	// MaxRetryHintBytes bounds a hint's name and its value.
	MaxRetryHintBytes = 64
)

// BoundRetryHints returns the hints of m that fit: at most MaxRetryHints
// (the first by name), names and values of 1 to MaxRetryHintBytes printable
// ASCII characters. nil when none does.
func BoundRetryHints(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	names := make([]string, 0, len(m))
	for name, v := range m {
		if printableASCII(name) && printableASCII(v) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	if len(names) > MaxRetryHints {
		names = names[:MaxRetryHints]
	}
	out := make(map[string]string, len(names))
	for _, name := range names {
		out[name] = m[name]
	}
	return out
}

func printableASCII(s string) bool {
	if s == "" || len(s) > MaxRetryHintBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

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
	}{{"id", r.ID, 128}, {"instance", r.Instance, 256}, {"answer", string(r.Answer), 64}} {
		if err := CheckText(f.name, f.v, f.max, false); err != nil {
			return Receipt{}, fmt.Errorf("receipt: %w", err)
		}
	}
	if r.StatusCode < 100 || r.StatusCode > 599 {
		return Receipt{}, fmt.Errorf("receipt: status code %d", r.StatusCode)
	}
	r.Key = k
	if r.RetryHints = BoundRetryHints(r.RetryHints); r.RetryHints == nil {
		r.RetryHints = map[string]string{}
	}
	return r, nil
}
