package envelope

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
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
	// HeaderTraceparent is the W3C trace context of the span that wrote the
	// message, set only when that span is sampled (tracing on; see
	// telemetry.InjectNATS). It is no part of the message's identity: not in
	// the Nats-Msg-Id, not in the payload hash.
	HeaderTraceparent = "traceparent"
	// HeaderRedeliveryID names the redelivery (an operator's) that
	// published a copy on INTAKE_OUT; HeaderOriginalMsgID carries the
	// Nats-Msg-Id the message was first published with (the outbox row's):
	// subscribers and HTTP destinations that deduplicate by message id use
	// it rather than the copy's Nats-Msg-Id.
	HeaderRedeliveryID  = "Intake-Redelivery-Id"
	HeaderOriginalMsgID = "Intake-Original-Msg-Id"
)

// MaxTraceparentBytes bounds a traceparent read from a message: version 00
// is 55 bytes; later versions may append fields. A longer one is ignored.
const MaxTraceparentBytes = 128

// Stream and subject names.
const (
	StreamIn      = "INTAKE_IN"
	StreamOut     = "INTAKE_OUT"
	SubjectInAll  = "intake.in.>"
	SubjectOutAll = "intake.out.>"
	// SubjectDispatchAll holds, in INTAKE_OUT, the copies an operator
	// redelivered to one HTTP destination: intake.dispatch.{destination}.
	// Subscribers of intake.out.> never see them.
	SubjectDispatchAll = "intake.dispatch.>"
	ConsumerName       = "processor"
	DefaultType        = "unknown"
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

// SubjectDispatch is the subject of a copy redelivered to destination
// only (SubjectDispatchAll).
func SubjectDispatch(destination string) string { return "intake.dispatch." + Token(destination) }

// SubjectOutPrefix is the start of every INTAKE_OUT subject of tenant: its
// messages match SubjectOutPrefix(tenant) + ">".
func SubjectOutPrefix(tenant string) string {
	return "intake.out." + Token(tenant) + "."
}

// SubjectOutFilter is the INTAKE_OUT filter of tenant's messages of
// integration, "intake.out.{tenant}.{integration}.>", where an empty tenant
// or integration stands for any ("*"), not for Token's "unknown".
func SubjectOutFilter(tenant, integration string) string {
	t, in := "*", "*"
	if tenant != "" {
		t = Token(tenant)
	}
	if integration != "" {
		in = Token(integration)
	}
	return "intake.out." + t + "." + in + ".>"
}

// IsSubjectOutFilter reports whether filter, a subject or a pattern with
// wildcards, starts "intake.out.": it can match INTAKE_OUT subjects only.
func IsSubjectOutFilter(filter string) bool {
	return strings.HasPrefix(filter, "intake.out.")
}

// Token turns an arbitrary string into one NATS subject token, one to one:
// two different strings never share a token, so one event type cannot be
// routed to another's subscribers ("a.b" and "a_b" used to collide). A clean
// string — printable ASCII without space, '.', '*', '>' and the escape '%' —
// is its own token ("push", "orders/create", "invoice_paid"); any other is
// percent-escaped byte by byte ("invoice.paid" becomes "invoice%2Epaid"),
// and ParseToken reverses it. The original value also stays in the
// Intake-Event-Type header. Empty values become "unknown".
func Token(s string) string {
	if s == "" {
		return DefaultType
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if !tokenByteClean(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	const hexDigits = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+16)
	for i := 0; i < len(s); i++ {
		if c := s[i]; tokenByteClean(c) {
			b = append(b, c)
		} else {
			b = append(b, tokenEscape, hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return string(b)
}

// tokenEscape starts an escaped byte in a token.
const tokenEscape = '%'

// ParseToken reverses Token for a token Token produced (except that
// "unknown" may also have been ""); ok is false for a string Token never
// produces.
func ParseToken(tok string) (s string, ok bool) {
	if tok == "" {
		return "", false
	}
	b := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c != tokenEscape {
			if !tokenByteClean(c) {
				return "", false
			}
			b = append(b, c)
			continue
		}
		if i+2 >= len(tok) {
			return "", false
		}
		hi, ok1 := unhex(tok[i+1])
		lo, ok2 := unhex(tok[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		d := hi<<4 | lo
		if tokenByteClean(d) {
			return "", false // Token leaves clean bytes as they are
		}
		b = append(b, d)
		i += 2
	}
	return string(b), true
}

// unhex reads one upper-case hex digit, the only case Token writes.
func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// tokenByteClean reports whether c stands for itself in a token.
func tokenByteClean(c byte) bool {
	return tokenByteOK(c) && c != tokenEscape
}

// tokenByteOK reports whether NATS allows c in a subject token.
func tokenByteOK(c byte) bool {
	return c > ' ' && c < 0x7f && c != '.' && c != '*' && c != '>'
}

// MaxIDBytes bounds event ids and accounts: they become part of the dedup key,
// a NATS header value and a primary key column.
const MaxIDBytes = 256

// ValidID reports whether s can serve as an event id or account: 1 to
// MaxIDBytes bytes of valid UTF-8 without control characters (C0, DEL, C1),
// bidirectional controls or line separators, which NATS headers and
// operators' terminals cannot carry safely: `intake events` prints ids as
// they are, and a right-to-left override would make one id read as another.
func ValidID(s string) bool {
	if s == "" || len(s) > MaxIDBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if Unprintable(r) {
			return false
		}
	}
	return true
}

// ValidType reports whether s can serve as an event type: like ValidID, but
// it may be empty (a provider that names no type).
func ValidType(s string) bool { return s == "" || ValidID(s) }

// Unprintable reports whether r is a control character (C0, DEL, C1), a
// bidirectional control (U+061C, U+200E, U+200F, U+202A–U+202E,
// U+2066–U+2069), a line or paragraph separator (U+2028, U+2029), or a
// character that shows as nothing (the soft hyphen U+00AD, U+180E, the
// zero-width space and joiners U+200B–U+200D, U+2060–U+2064, U+FEFF):
// "evt_1" and "evt​_1" must not read as one id.
func Unprintable(r rune) bool {
	switch {
	case r < ' ', r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	case r == 0x00ad, r == 0x180e, r >= 0x200b && r <= 0x200d, r >= 0x2060 && r <= 0x2064, r == 0xfeff:
		return true
	}
	return false
}

// CleanType returns an event type fit for a header value: unprintable
// characters (see Unprintable) become '_' and it is cut to MaxIDBytes.
// Verifiers refuse such types (ValidType); this is the last line for the
// values that did not pass through one.
func CleanType(s string) string {
	if len(s) > MaxIDBytes {
		s = s[:MaxIDBytes]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "_")
	}
	return strings.Map(func(r rune) rune {
		if Unprintable(r) {
			return '_'
		}
		return r
	}, s)
}
