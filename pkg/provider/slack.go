package provider

// Slack (https://api.slack.com/authentication/verifying-requests-from-slack):
// X-Slack-Signature is "v0=" + hex HMAC-SHA256 of "v0:{ts}:{body}", where ts
// is X-Slack-Request-Timestamp exactly as sent, keyed with the app's signing
// secret as written. The timestamp must lie within ± tolerance (Slack's SDKs
// use 5 minutes, the default).
//
// Identity: the event id is the Events API body's "event_id"; the type is
// the inner "event.type" ("message", "app_mention", …), else the top-level
// "type". Slash commands and interactivity payloads are form-encoded and
// carry no event id: configure event_id for them or expect 400.
//
// Slack's url_verification handshake is verified like any request, then
// answered with its challenge and never published (Event.Challenge).

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/intakehq/intake/internal/hmacpool"
)

// Canonical header names.
const (
	slackSignatureHeader = "X-Slack-Signature"
	slackTimestampHeader = "X-Slack-Request-Timestamp"
)

// maxChallengeBytes bounds the url_verification challenge echoed back;
// Slack's are a few dozen characters.
const maxChallengeBytes = 512

type slack struct {
	keys        []*hmacpool.Key // HMAC-SHA256, one per secret
	tolerance   time.Duration
	identity    identityReader
	defaultType bool // fall back from event.type to type
}

func newSlack(cfg Config) (Verifier, error) {
	s := &slack{keys: hmacKeys(sha256.New, cfg.Secrets), tolerance: cfg.Tolerance, defaultType: cfg.EventType.IsZero()}
	var err error
	s.identity, err = newIdentity(cfg, identityFields{
		eventID:   Field{Field: "event_id"},
		eventType: Field{Field: "event.type"},
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *slack) Verify(d *Request) (Identity, error) {
	sig := d.Header.Get(slackSignatureHeader)
	if sig == "" {
		return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, slackSignatureHeader)
	}
	ts := d.Header.Get(slackTimestampHeader)
	if ts == "" {
		return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, slackTimestampHeader)
	}
	sec, err := parseUnixSeconds(ts)
	if err == nil {
		err = checkWithin(sec, d.now(), s.tolerance)
	}
	if err != nil {
		return Identity{}, fmt.Errorf("%w (%s)", err, slackTimestampHeader)
	}
	hexMAC, ok := strings.CutPrefix(sig, "v0=")
	var want [sha256.Size]byte
	if !ok || len(hexMAC) != hex.EncodedLen(sha256.Size) {
		return Identity{}, fmt.Errorf("%w: %s is not v0=<64 hex digits>", ErrBadSignature, slackSignatureHeader)
	}
	if _, err := hex.Decode(want[:], []byte(hexMAC)); err != nil {
		return Identity{}, fmt.Errorf("%w: %s is not hex", ErrBadSignature, slackSignatureHeader)
	}
	idx := firstMatch(s.keys, want[:], []byte("v0:"+ts+":"), d.Body)
	if idx < 0 {
		return Identity{}, fmt.Errorf("%w: %s does not match", ErrBadSignature, slackSignatureHeader)
	}

	body := jsonBody{raw: d.Body}
	// A body that is not JSON (a slash command) is no handshake; whether it
	// is acceptable is up to the configured event id below.
	if typ, _ := body.field("type"); typ == "url_verification" {
		challenge, _ := body.field("challenge")
		if !validChallenge(challenge) {
			return Identity{}, fmt.Errorf("%w: url_verification without a usable challenge", ErrMalformed)
		}
		return Identity{Type: typ, Challenge: challenge, SecretIndex: idx}, nil
	}
	ev := Identity{SecretIndex: idx}
	if err := s.identity.read(d.Header, &body, &ev); err != nil {
		return Identity{}, err
	}
	if ev.Type == "" && s.defaultType {
		ev.Type, _ = body.field("type")
		if err := checkType(ev.Type); err != nil {
			return Identity{}, err
		}
	}
	ev.RetryHints = slackRetryHints(d.Header)
	return ev, nil
}

// Slack's retry headers (not signed): the attempt number and why the last
// attempt failed ("http_timeout", …).
const (
	slackRetryNumHeader    = "X-Slack-Retry-Num"
	slackRetryReasonHeader = "X-Slack-Retry-Reason"
	maxRetryReasonBytes    = 32
)

// slackRetryHints keeps the retry headers when they look like Slack's: a
// number of at most three digits and a reason of at most 32 characters of
// [a-z0-9_]; anything else is dropped, not stored.
func slackRetryHints(h http.Header) [2]RetryHint {
	var out [2]RetryHint
	if n := h.Get(slackRetryNumHeader); n != "" && len(n) <= 3 && strings.Trim(n, "0123456789") == "" {
		out[0] = RetryHint{Name: slackRetryNumHeader, Value: n}
	}
	if r := h.Get(slackRetryReasonHeader); r != "" && len(r) <= maxRetryReasonBytes &&
		strings.Trim(r, "abcdefghijklmnopqrstuvwxyz0123456789_") == "" {
		out[1] = RetryHint{Name: slackRetryReasonHeader, Value: r}
	}
	return out
}

// validChallenge accepts 1 to maxChallengeBytes printable ASCII characters:
// the answer echoes it, so nothing else is worth reflecting.
func validChallenge(c string) bool {
	if c == "" || len(c) > maxChallengeBytes {
		return false
	}
	for i := 0; i < len(c); i++ {
		if c[i] <= ' ' || c[i] > '~' {
			return false
		}
	}
	return true
}
