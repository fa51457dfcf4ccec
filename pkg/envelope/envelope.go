package envelope

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/intakehq/intake/pkg/inbox"
)

// Header names carried by every message on INTAKE_IN and INTAKE_OUT.
const (
	HeaderMsgID         = "Nats-Msg-Id"
	HeaderKey           = "Intake-Key"
	HeaderIntegration   = "Intake-Integration"
	HeaderTenant        = "Intake-Tenant"
	HeaderAccount       = "Intake-Account"
	HeaderEventID       = "Intake-Event-Id"
	HeaderEventType     = "Intake-Event-Type"
	HeaderPayloadSHA256 = "Intake-Payload-Sha256"
	HeaderReceivedAt    = "Intake-Received-At"
	HeaderReplayID      = "Intake-Replay-Id"
	HeaderReplayMode    = "Intake-Replay-Mode"
	// HeaderObjectID and HeaderObjectVersion carry the ordering guard's
	// inputs when the integration configures them; the version is already
	// normalised to an integer (see ParseVersion).
	HeaderObjectID      = "Intake-Object-Id"
	HeaderObjectVersion = "Intake-Object-Version"
	// HeaderExecutionID is set on processed messages: which handler run
	// emitted them.
	HeaderExecutionID = "Intake-Execution-Id"
	// HeaderInstance names the ingress instance that accepted a delivery and
	// HeaderRetryHints carries the provider's retry headers (JSON), so the
	// accepted delivery enters the delivery history from the message itself.
	HeaderInstance   = "Intake-Instance"
	HeaderRetryHints = "Intake-Retry-Hints"
)

// Replay modes, the values of Intake-Replay-Mode: package inbox's, named
// here beside the header for publishers.
const (
	ReplayExact     = inbox.ReplayExact
	ReplayReexecute = inbox.ReplayReexecute
)

// Stream and subject names.
const (
	StreamIn       = "INTAKE_IN"
	StreamOut      = "INTAKE_OUT"
	SubjectInAll   = "intake.in.>"
	SubjectOutAll  = "intake.out.>"
	ConsumerName   = "processor"
	DefaultType    = "unknown"
	hashPrefixHex  = 16
	maxTokenLength = 128
)

// Key identifies one logical provider event: integration, provider account
// scope and the provider's stable event id.
type Key struct {
	Integration string
	Account     string
	EventID     string
}

// String renders the scoped key `{integration}/{account}/{event_id}`.
func (k Key) String() string {
	return k.Integration + "/" + k.Account + "/" + k.EventID
}

// ParseKey splits a scoped key. The event id may itself contain '/', so only
// the first two separators count.
func ParseKey(s string) (Key, bool) {
	integration, rest, ok := strings.Cut(s, "/")
	if !ok || integration == "" {
		return Key{}, false
	}
	account, eventID, ok := strings.Cut(rest, "/")
	if !ok || eventID == "" {
		return Key{}, false
	}
	return Key{Integration: integration, Account: account, EventID: eventID}, true
}

// PayloadSHA256 returns the hex SHA-256 of the raw body.
func PayloadSHA256(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// MsgID is the JetStream dedup id: the scoped key plus the first 16 hex
// characters of the payload hash. With the hash in the id an exact retry is
// stopped by the stream, while a same-id-different-payload delivery reaches
// the inbox, where it is recorded as a conflict instead of being swallowed.
func MsgID(k Key, payloadSHA256 string) string {
	h := payloadSHA256
	if len(h) > hashPrefixHex {
		h = h[:hashPrefixHex]
	}
	return k.String() + "#" + h
}

// SubjectIn is the INTAKE_IN subject for a verified delivery.
func SubjectIn(integration, eventType string) string {
	return "intake.in." + Token(integration) + "." + Token(eventType)
}

// SubjectInPrefix is the start of every INTAKE_IN subject of integration:
// its messages match SubjectInPrefix(integration) + ">".
func SubjectInPrefix(integration string) string {
	return "intake.in." + Token(integration) + "."
}

// IsSubjectIn reports whether subject is an INTAKE_IN subject of
// integration (intake.in.{Token(integration)}.>): a message whose key names
// one integration but whose subject is another's did not come from ingress.
func IsSubjectIn(subject, integration string) bool {
	rest, ok := strings.CutPrefix(subject, SubjectInPrefix(integration))
	return ok && rest != ""
}

// SubjectOut is the INTAKE_OUT subject internal services subscribe to.
func SubjectOut(tenant, integration, eventType string) string {
	return "intake.out." + Token(tenant) + "." + Token(integration) + "." + Token(eventType)
}

// Token turns an arbitrary string into one NATS subject token. Characters NATS
// forbids or gives meaning to (space, '.', '*', '>', control characters) become
// '_', so "invoice.paid" becomes "invoice_paid"; the original value stays in
// the Intake-Event-Type header. Empty values become "unknown".
func Token(s string) string {
	if s == "" {
		return DefaultType
	}
	if len(s) > maxTokenLength {
		s = s[:maxTokenLength]
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if !tokenByteOK(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if !tokenByteOK(c) {
			b[i] = '_'
		}
	}
	return string(b)
}

func tokenByteOK(c byte) bool {
	return c > ' ' && c < 0x7f && c != '.' && c != '*' && c != '>'
}

// MaxIDBytes bounds event ids and accounts: they become part of the dedup key,
// a NATS header value and a primary key column.
const MaxIDBytes = 256

// ValidID reports whether s can serve as an event id or account: 1 to
// MaxIDBytes bytes of valid UTF-8 without control characters (which NATS
// headers and operators' terminals cannot carry safely).
func ValidID(s string) bool {
	return CheckText("id", s, MaxIDBytes, true) == nil
}

// CleanType returns an event type fit for a header value: control
// characters become '_' and it is cut to MaxIDBytes.
func CleanType(s string) string {
	if len(s) > MaxIDBytes {
		s = s[:MaxIDBytes]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "_")
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return '_'
		}
		return r
	}, s)
}
