package provider

// Standard Webhooks v1 (https://www.standardwebhooks.com): the sender signs
// "{webhook-id}.{webhook-timestamp}.{body}" with HMAC-SHA256 and sends
// webhook-id, webhook-timestamp (unix seconds) and webhook-signature, a
// space-separated list of "v1,<base64 MAC>" entries of which any may match
// (the sender's own rotation). Secrets are "whsec_" + base64 of the key. The
// event id is webhook-id, which the signature covers; the type is the body's
// "type" field. Config.EventID and Config.EventType override either.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// standardSecretPrefix marks a Standard Webhooks secret; the reference
// libraries strip it when present and base64-decode what remains either way.
const standardSecretPrefix = "whsec_"

type standard struct {
	// Header names are fields, not constants, so a sender using the same
	// scheme under other names (Svix's svix-id, …) can reuse the verifier.
	idHeader, timestampHeader, signatureHeader string

	keys      [][]byte // decoded secrets, in Config.Secrets order
	tolerance time.Duration
	eventID   source // zero: webhook-id
	eventType source // zero: body field "type", best effort
}

func newStandard(cfg Config) (Verifier, error) {
	s := &standard{
		idHeader:        textproto.CanonicalMIMEHeaderKey("webhook-id"),
		timestampHeader: textproto.CanonicalMIMEHeaderKey("webhook-timestamp"),
		signatureHeader: textproto.CanonicalMIMEHeaderKey("webhook-signature"),
		keys:            make([][]byte, len(cfg.Secrets)),
		tolerance:       cfg.Tolerance,
	}
	for i, secret := range cfg.Secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, standardSecretPrefix))
		if err != nil {
			// The base64 error names only a byte offset, never secret content.
			return nil, fmt.Errorf("secrets[%d]: not a whsec_ secret (base64 after the prefix): %w", i, err)
		}
		if len(key) == 0 {
			return nil, fmt.Errorf("secrets[%d]: decodes to an empty key", i)
		}
		s.keys[i] = key
	}
	var err error
	if s.eventID, err = newSource("event_id", cfg.EventID); err != nil {
		return nil, err
	}
	if s.eventType, err = newSource("event_type", cfg.EventType); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *standard) Verify(d *Delivery) (Event, error) {
	id := d.Header.Get(s.idHeader)
	if id == "" {
		return Event{}, fmt.Errorf("%w: %s", ErrMissingHeader, s.idHeader)
	}
	ts := d.Header.Get(s.timestampHeader)
	if ts == "" {
		return Event{}, fmt.Errorf("%w: %s", ErrMissingHeader, s.timestampHeader)
	}
	sigs := d.Header.Get(s.signatureHeader)
	if sigs == "" {
		return Event{}, fmt.Errorf("%w: %s", ErrMissingHeader, s.signatureHeader)
	}
	now := d.Now
	if now.IsZero() {
		now = time.Now()
	}
	// Timestamp first: it is cheap and rejects stale replays without any HMAC.
	if err := checkUnixTimestamp(ts, now, s.tolerance); err != nil {
		return Event{}, fmt.Errorf("%w (%s)", err, s.timestampHeader)
	}
	idx, ok := s.match(id, ts, sigs, d.Body)
	if !ok {
		return Event{}, fmt.Errorf("%w: no %s entry matches", ErrBadSignature, s.signatureHeader)
	}

	// Verified: only now is the body parsed.
	ev := Event{ID: id, SecretIndex: idx}
	body := jsonBody{raw: d.Body}
	var err error
	if !s.eventID.isZero() {
		if ev.ID, err = s.eventID.read(d.Header, &body); err != nil {
			return Event{}, fmt.Errorf("event id: %w", err)
		}
		if ev.ID == "" {
			return Event{}, fmt.Errorf("%w: no event id at the configured event_id source", ErrMalformed)
		}
	}
	if s.eventType.isZero() {
		// The spec only recommends a "type" field, so a body without one, or
		// one that is not JSON at all, is still a valid delivery.
		ev.Type, _ = body.field("type")
	} else if ev.Type, err = s.eventType.read(d.Header, &body); err != nil {
		return Event{}, fmt.Errorf("event type: %w", err)
	}
	return ev, nil
}

// match returns the index of the first key whose MAC equals one of the v1
// entries in sigs.
func (s *standard) match(id, ts, sigs string, body []byte) (int, bool) {
	// Decode the entries once, not once per key; the array keeps the common
	// case (a few entries) off the heap.
	var buf [4][sha256.Size]byte
	want := buf[:0]
	for sigs != "" {
		var entry string
		entry, sigs, _ = strings.Cut(sigs, " ")
		if mac, ok := decodeV1(entry); ok {
			want = append(want, mac)
		}
	}
	if len(want) == 0 {
		return 0, false
	}

	signed := make([]byte, 0, len(id)+len(ts)+2)
	signed = append(append(append(append(signed, id...), '.'), ts...), '.')
	sum := make([]byte, 0, sha256.Size)
	for i, key := range s.keys {
		m := hmac.New(sha256.New, key)
		m.Write(signed)
		m.Write(body)
		sum = m.Sum(sum[:0])
		for j := range want {
			if hmac.Equal(sum, want[j][:]) {
				return i, true
			}
		}
	}
	return 0, false
}

// decodeV1 decodes one "v1,<base64>" entry. Other versions (v1a is
// ed25519) and undecodable entries are skipped rather than failing the
// delivery, as the spec asks, so senders can add schemes without breaking us.
func decodeV1(entry string) ([sha256.Size]byte, bool) {
	var mac [sha256.Size]byte
	version, b64, ok := strings.Cut(entry, ",")
	// Padded base64 of 32 bytes is exactly 44 characters; anything else
	// cannot match, so it is not worth decoding.
	if !ok || version != "v1" || len(b64) != base64.StdEncoding.EncodedLen(sha256.Size) {
		return mac, false
	}
	var out [sha256.Size + 1]byte
	n, err := base64.StdEncoding.Decode(out[:], []byte(b64))
	if err != nil || n != sha256.Size {
		return mac, false
	}
	copy(mac[:], out[:n])
	return mac, true
}

// checkUnixTimestamp checks that ts is a decimal unix time in seconds within
// tolerance of now, in either direction. Only digits are accepted: the value
// is signed as sent, so "+17…" or " 17…" would never be what the sender meant.
func checkUnixTimestamp(ts string, now time.Time, tolerance time.Duration) error {
	for i := 0; i < len(ts); i++ {
		if ts[i] < '0' || ts[i] > '9' {
			return fmt.Errorf("%w: not a unix time in seconds", ErrTimestamp)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: not a unix time in seconds", ErrTimestamp)
	}
	// Sub saturates, so absurd timestamps land outside the window, not wrap.
	if skew := now.Sub(time.Unix(sec, 0)); skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w: %s away from now", ErrTimestamp, skew.Round(time.Second))
	}
	return nil
}
