package provider

// Stripe (https://docs.stripe.com/webhooks#verify-manually): the header
// Stripe-Signature is "t={unix seconds},v1={hex HMAC-SHA256}[,v1=…]", the MAC
// is over "{t}.{body}" keyed with the whole "whsec_…" string as bytes (it is
// not base64-decoded), and any v1 entry may match. This follows stripe-go's
// webhook package exactly where it matters:
//
//   - every comma-separated pair must be key=value, else the header is invalid;
//   - v0 and unknown keys are ignored, undecodable v1 entries skipped;
//   - the last t wins, and the MAC is over its parsed value;
//   - the tolerance bounds only the past (default 300 s); a future t passes.
//
// One deliberate difference: t must be plain digits (stripe-go also takes a
// sign). The event id is the body's "id", the type its "type", the object id
// data.object.id and the object version the event's "created".

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/intakehq/intake/internal/hmacpool"
)

const stripeSignatureHeader = "Stripe-Signature"

type stripe struct {
	keys      []*hmacpool.Key // HMAC-SHA256 under each whole whsec_ string
	tolerance time.Duration
	identity  identityReader
}

func newStripe(cfg Config) (Verifier, error) {
	s := &stripe{keys: hmacKeys(sha256.New, cfg.Secrets), tolerance: cfg.Tolerance}
	var err error
	s.identity, err = newIdentity(cfg, identityFields{
		eventID:       Field{Field: "id"},
		eventType:     Field{Field: "type"},
		objectID:      Field{Field: "data.object.id"},
		objectVersion: Field{Field: "created"},
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *stripe) Verify(d *Request) (Identity, error) {
	header := d.Header.Get(stripeSignatureHeader)
	if header == "" {
		return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, stripeSignatureHeader)
	}
	sh, err := parseStripeHeader(header)
	if err != nil {
		return Identity{}, err
	}
	if err := checkNotOlder(sh.timestamp, d.now(), s.tolerance); err != nil {
		return Identity{}, fmt.Errorf("%w (%s t)", err, stripeSignatureHeader)
	}

	var tsBuf [21]byte
	signed := append(strconv.AppendInt(tsBuf[:0], sh.timestamp, 10), '.')
	idx := -1
	sum := make([]byte, 0, sha256.Size)
	for i, key := range s.keys {
		sum = key.Sum(sum[:0], signed, d.Body)
		if sh.matches(sum) {
			idx = i
			break
		}
	}
	if idx < 0 {
		return Identity{}, fmt.Errorf("%w: no %s v1 entry matches", ErrBadSignature, stripeSignatureHeader)
	}

	ev := Identity{SecretIndex: idx}
	body := jsonBody{raw: d.Body}
	if err := s.identity.read(d.Header, &body, &ev); err != nil {
		return Identity{}, err
	}
	return ev, nil
}

// stripeHeader is a parsed Stripe-Signature value.
type stripeHeader struct {
	timestamp int64
	v1        [][]byte // decoded v1 MACs
}

func (sh *stripeHeader) matches(mac []byte) bool {
	for _, sig := range sh.v1 {
		if hmac.Equal(mac, sig) {
			return true
		}
	}
	return false
}

// parseStripeHeader parses "t=…,v1=…,…" as stripe-go does (see the file
// comment), failing with ErrTimestamp for a missing or malformed t and
// ErrBadSignature for a malformed header or one without a usable v1 entry.
func parseStripeHeader(header string) (stripeHeader, error) {
	var sh stripeHeader
	var haveT bool
	for rest := header; ; {
		var pair string
		var more bool
		pair, rest, more = strings.Cut(rest, ",")
		key, value, ok := strings.Cut(pair, "=")
		if !ok || strings.Contains(value, "=") {
			return stripeHeader{}, fmt.Errorf("%w: %s is not a list of key=value pairs", ErrBadSignature, stripeSignatureHeader)
		}
		switch key {
		case "t":
			var err error
			if sh.timestamp, err = parseUnixSeconds(value); err != nil {
				return stripeHeader{}, fmt.Errorf("%w (%s t)", err, stripeSignatureHeader)
			}
			haveT = true
		case "v1":
			// Only a 32-byte MAC can match; skipping the rest early also
			// bounds the work a long header can cause.
			if len(value) == hex.EncodedLen(sha256.Size) {
				if mac, err := hex.DecodeString(value); err == nil {
					sh.v1 = append(sh.v1, mac)
				}
			}
		}
		if !more {
			break
		}
	}
	if !haveT {
		return stripeHeader{}, fmt.Errorf("%w: %s has no t", ErrTimestamp, stripeSignatureHeader)
	}
	if len(sh.v1) == 0 {
		return stripeHeader{}, fmt.Errorf("%w: %s has no valid v1 entry", ErrBadSignature, stripeSignatureHeader)
	}
	return sh, nil
}
