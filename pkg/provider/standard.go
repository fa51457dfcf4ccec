package provider

// Standard Webhooks v1 (https://www.standardwebhooks.com): the sender signs
// "{webhook-id}.{webhook-timestamp}.{body}" and sends webhook-id,
// webhook-timestamp (unix seconds) and webhook-signature, a space-separated
// list of "{version},{base64 signature}" entries of which any may match (the
// sender's own rotation):
//
//   - v1: HMAC-SHA256 keyed with a "whsec_" + base64 secret;
//   - v1a: ed25519, verified with a "whpk_" + base64 public key.
//
// Secrets may mix both kinds, so a sender can move from symmetric to
// asymmetric signing without downtime. The event id is webhook-id, which the
// signature covers; the type is the body's "type" field. Config.EventID and
// Config.EventType override either. svix.go reuses this verifier under the
// svix-* header names.

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/intakehq/intake/internal/hmacpool"
)

// Key prefixes of the spec: a symmetric secret, an ed25519 public key, and
// the ed25519 secret key that only the sender should hold.
const (
	standardSecretPrefix     = "whsec_"
	standardPublicKeyPrefix  = "whpk_"
	standardPrivateKeyPrefix = "whsk_"
)

// maxEd25519Entries bounds the v1a entries tried per delivery: an ed25519
// check costs about a thousand HMACs, and a header stuffed with junk entries
// must not buy an attacker that much CPU. Senders send one or two.
const maxEd25519Entries = 8

// strictBase64 rejects encodings with non-zero padding bits, so a signature
// is accepted in exactly the spelling the reference libraries compare.
var strictBase64 = base64.StdEncoding.Strict()

// headerNames is one set of the three headers the scheme reads.
type headerNames struct{ id, timestamp, signature string }

func canonicalHeaders(id, timestamp, signature string) headerNames {
	return headerNames{
		id:        textproto.CanonicalMIMEHeaderKey(id),
		timestamp: textproto.CanonicalMIMEHeaderKey(timestamp),
		signature: textproto.CanonicalMIMEHeaderKey(signature),
	}
}

// standardKey is one configured secret: an HMAC key or a public key.
type standardKey struct {
	mac *hmacpool.Key // a whsec_ secret's HMAC-SHA256 states
	pub ed25519.PublicKey
}

type standard struct {
	// headerSets are tried in order; the first whose three headers are all
	// present is used (svix: svix-*, then webhook-*).
	headerSets []headerNames

	keys              []standardKey // in Config.Secrets order
	hasMAC, hasPubKey bool
	tolerance         time.Duration
	identity          identityReader
}

func newStandard(cfg Config) (Verifier, error) {
	return newStandardScheme(cfg, []headerNames{canonicalHeaders("webhook-id", "webhook-timestamp", "webhook-signature")})
}

func newStandardScheme(cfg Config, sets []headerNames) (*standard, error) {
	s := &standard{
		headerSets: sets,
		keys:       make([]standardKey, len(cfg.Secrets)),
		tolerance:  cfg.Tolerance,
	}
	for i, secret := range cfg.Secrets {
		key, err := parseStandardKey(secret)
		if err != nil {
			return nil, fmt.Errorf("secrets[%d]: %w", i, err)
		}
		s.keys[i] = key
		s.hasMAC = s.hasMAC || key.mac != nil
		s.hasPubKey = s.hasPubKey || key.pub != nil
	}
	var err error
	// The id is the signed id header unless configured otherwise; the
	// spec only recommends a "type" field, so reading it is best effort.
	if s.identity, err = newIdentity(cfg, identityFields{eventType: Field{Field: "type"}}); err != nil {
		return nil, err
	}
	return s, nil
}

// parseStandardKey decodes one configured secret. Error messages name the
// problem, never secret content (base64 errors carry only an offset).
func parseStandardKey(secret string) (standardKey, error) {
	switch {
	case strings.HasPrefix(secret, standardPrivateKeyPrefix):
		return standardKey{}, fmt.Errorf("a whsk_ key is the sender's ed25519 secret key; configure its whpk_ public key")
	case strings.HasPrefix(secret, standardPublicKeyPrefix):
		pub, err := base64.StdEncoding.DecodeString(secret[len(standardPublicKeyPrefix):])
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return standardKey{}, fmt.Errorf("not a whpk_ key (base64 of a %d-byte ed25519 public key after the prefix)", ed25519.PublicKeySize)
		}
		return standardKey{pub: ed25519.PublicKey(pub)}, nil
	default:
		// The reference libraries strip whsec_ when present and
		// base64-decode what remains either way.
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, standardSecretPrefix))
		if err != nil {
			return standardKey{}, fmt.Errorf("not a whsec_ secret (base64 after the prefix): %w", err)
		}
		if len(key) == 0 {
			return standardKey{}, fmt.Errorf("decodes to an empty key")
		}
		return standardKey{mac: hmacpool.New(sha256.New, key)}, nil
	}
}

func (s *standard) Verify(d *Request) (Identity, error) {
	names, id, ts, sigs, err := s.headers(d.Header)
	if err != nil {
		return Identity{}, err
	}
	// Timestamp first: it is cheap and rejects stale replays without any MAC.
	sec, err := parseUnixSeconds(ts)
	if err == nil {
		err = checkWithin(sec, d.now(), s.tolerance)
	}
	if err != nil {
		return Identity{}, fmt.Errorf("%w (%s)", err, names.timestamp)
	}
	// The reference libraries sign the parsed number, not the header text;
	// signing the same makes "0170…" verify exactly where theirs does.
	var tsBuf [20]byte
	idx, ok := s.match(id, strconv.AppendInt(tsBuf[:0], sec, 10), sigs, d.Body)
	if !ok {
		return Identity{}, fmt.Errorf("%w: no %s entry matches", ErrBadSignature, names.signature)
	}

	// Verified: only now is the body parsed.
	ev := Identity{ID: id, SecretIndex: idx}
	body := jsonBody{raw: d.Body}
	if err := s.identity.read(d.Header, &body, &ev); err != nil {
		return Identity{}, err
	}
	return ev, nil
}

// headers returns the first complete header set and its values, or an error
// naming the first missing header of the primary set.
func (s *standard) headers(h http.Header) (headerNames, string, string, string, error) {
	for _, n := range s.headerSets {
		id, ts, sigs := h.Get(n.id), h.Get(n.timestamp), h.Get(n.signature)
		if id != "" && ts != "" && sigs != "" {
			return n, id, ts, sigs, nil
		}
	}
	n := s.headerSets[0]
	missing := n.signature
	for _, name := range []string{n.id, n.timestamp} {
		if h.Get(name) == "" {
			missing = name
			break
		}
	}
	return headerNames{}, "", "", "", fmt.Errorf("%w: %s", ErrMissingHeader, missing)
}

// match returns the index of the first key (in configuration order) that
// verifies one of the entries in sigs over "{id}.{ts}.{body}".
func (s *standard) match(id string, ts []byte, sigs string, body []byte) (int, bool) {
	// Decode the entries once, not once per key; the arrays keep the common
	// case (a few entries) off the heap.
	var macBuf [4][sha256.Size]byte
	var edBuf [2][ed25519.SignatureSize]byte
	macs, eds := macBuf[:0], edBuf[:0]
	for sigs != "" {
		var entry string
		entry, sigs, _ = strings.Cut(sigs, " ")
		version, rest, ok := strings.Cut(entry, ",")
		if !ok {
			continue
		}
		// Like the reference libraries, read the text up to a second comma.
		value, _, _ := strings.Cut(rest, ",")
		switch {
		case version == "v1" && s.hasMAC:
			var mac [sha256.Size]byte
			if decodeFixed(mac[:], value) {
				macs = append(macs, mac)
			}
		case version == "v1a" && s.hasPubKey && len(eds) < maxEd25519Entries:
			var sig [ed25519.SignatureSize]byte
			if decodeFixed(sig[:], value) {
				eds = append(eds, sig)
			}
		}
		// Other versions and undecodable entries are skipped, as the spec
		// asks, so senders can add schemes without breaking receivers.
	}
	if len(macs) == 0 && len(eds) == 0 {
		return 0, false
	}

	prefix := make([]byte, 0, len(id)+len(ts)+2)
	prefix = append(append(append(append(prefix, id...), '.'), ts...), '.')
	var signed []byte // ed25519 needs the message in one piece; built once
	sum := make([]byte, 0, sha256.Size)
	for i, key := range s.keys {
		switch {
		case key.mac != nil && len(macs) > 0:
			sum = key.mac.Sum(sum[:0], prefix, body)
			for j := range macs {
				if hmac.Equal(sum, macs[j][:]) {
					return i, true
				}
			}
		case key.pub != nil && len(eds) > 0:
			if signed == nil {
				signed = append(append(make([]byte, 0, len(prefix)+len(body)), prefix...), body...)
			}
			for j := range eds {
				if ed25519.Verify(key.pub, signed, eds[j][:]) {
					return i, true
				}
			}
		}
	}
	return 0, false
}

// decodeFixed decodes canonical padded base64 of exactly len(dst) bytes.
func decodeFixed(dst []byte, b64 string) bool {
	// Anything of another length cannot match, so it is not worth decoding.
	if len(b64) != base64.StdEncoding.EncodedLen(len(dst)) {
		return false
	}
	var out [ed25519.SignatureSize + 2]byte
	n, err := strictBase64.Decode(out[:], []byte(b64))
	if err != nil || n != len(dst) {
		return false
	}
	copy(dst, out[:n])
	return true
}
