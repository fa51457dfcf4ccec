package provider

// Generic HMAC: the sender puts HMAC-SHA256 or HMAC-SHA512 of the raw body,
// keyed with the secret's bytes as written, hex or base64 encoded and
// optionally prefixed ("sha256=…"), in the header hmac.header. The scheme
// names no event id, so event_id (a header or a body field) is required;
// event_type is optional. Only the body is signed: an id taken from a header
// can be changed by anyone replaying a captured delivery, which defeats
// deduplication, so prefer a body field when the sender puts the id there.

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/textproto"
	"strings"
)

type hmacVerifier struct {
	header  string // canonical
	prefix  string
	newHash func() hash.Hash
	size    int // MAC length in bytes
	base64  bool

	keys      [][]byte
	eventID   source
	eventType source
}

func newHMAC(cfg Config) (Verifier, error) {
	c := cfg.HMAC
	if c.Header == "" {
		return nil, fmt.Errorf("hmac.header: required for provider hmac")
	}
	if !validHeaderName(c.Header) {
		return nil, fmt.Errorf("hmac.header: %q is not a valid header name", c.Header)
	}
	v := &hmacVerifier{
		header: textproto.CanonicalMIMEHeaderKey(c.Header),
		prefix: c.Prefix,
		keys:   make([][]byte, len(cfg.Secrets)),
	}
	switch strings.ToLower(c.Algorithm) {
	case "", "sha256":
		v.newHash, v.size = sha256.New, sha256.Size
	case "sha512":
		v.newHash, v.size = sha512.New, sha512.Size
	default:
		return nil, fmt.Errorf("hmac.algorithm: unknown %q (sha256 or sha512)", c.Algorithm)
	}
	switch strings.ToLower(c.Encoding) {
	case "", "hex":
	case "base64":
		v.base64 = true
	default:
		return nil, fmt.Errorf("hmac.encoding: unknown %q (hex or base64)", c.Encoding)
	}
	for i, s := range cfg.Secrets {
		v.keys[i] = []byte(s)
	}
	if cfg.EventID.IsZero() {
		return nil, fmt.Errorf("event_id: header or field required for provider hmac")
	}
	var err error
	if v.eventID, err = newSource("event_id", cfg.EventID); err != nil {
		return nil, err
	}
	if v.eventType, err = newSource("event_type", cfg.EventType); err != nil {
		return nil, err
	}
	return v, nil
}

func (v *hmacVerifier) Verify(d *Delivery) (Event, error) {
	sig := d.Header.Get(v.header)
	if sig == "" {
		return Event{}, fmt.Errorf("%w: %s", ErrMissingHeader, v.header)
	}
	// A later optional timestamp header is checked here, before any MAC work,
	// and folded into the signed content by sign.
	want, err := v.decode(sig)
	if err != nil {
		return Event{}, err
	}
	idx := -1
	sum := make([]byte, 0, v.size)
	for i := range v.keys {
		sum = v.sign(sum[:0], i, d)
		if hmac.Equal(sum, want) {
			idx = i
			break
		}
	}
	if idx < 0 {
		return Event{}, fmt.Errorf("%w: %s does not match", ErrBadSignature, v.header)
	}

	// Verified: only now is the body parsed.
	body := jsonBody{raw: d.Body}
	ev := Event{SecretIndex: idx}
	if ev.ID, err = v.eventID.read(d.Header, &body); err != nil {
		return Event{}, fmt.Errorf("event id: %w", err)
	}
	if ev.ID == "" {
		return Event{}, fmt.Errorf("%w: no event id at the configured event_id source", ErrMalformed)
	}
	if ev.Type, err = v.eventType.read(d.Header, &body); err != nil {
		return Event{}, fmt.Errorf("event type: %w", err)
	}
	return ev, nil
}

// sign appends the MAC of the signed content under key i to dst.
func (v *hmacVerifier) sign(dst []byte, i int, d *Delivery) []byte {
	m := hmac.New(v.newHash, v.keys[i])
	m.Write(d.Body)
	return m.Sum(dst)
}

// decode strips the prefix and decodes the MAC. Any failure is a bad
// signature, not a malformed delivery: nothing is verified yet.
func (v *hmacVerifier) decode(sig string) ([]byte, error) {
	rest, ok := strings.CutPrefix(sig, v.prefix)
	if !ok {
		return nil, fmt.Errorf("%w: %s lacks the configured prefix", ErrBadSignature, v.header)
	}
	// Room for the MAC plus base64's partial trailing byte.
	out := make([]byte, v.size+2)
	var n int
	var err error
	if v.base64 {
		// Senders differ on alphabet and padding; all spell the same MAC, and
		// the MAC comparison, not the encoding, is what authenticates.
		rest = strings.TrimRight(rest, "=")
		enc := base64.RawStdEncoding
		if strings.ContainsAny(rest, "-_") {
			enc = base64.RawURLEncoding
		}
		if len(rest) != enc.EncodedLen(v.size) {
			return nil, fmt.Errorf("%w: %s has the wrong length", ErrBadSignature, v.header)
		}
		n, err = enc.Decode(out, []byte(rest))
	} else {
		if len(rest) != hex.EncodedLen(v.size) {
			return nil, fmt.Errorf("%w: %s has the wrong length", ErrBadSignature, v.header)
		}
		n, err = hex.Decode(out, []byte(rest)) // accepts either case
	}
	if err != nil || n != v.size {
		return nil, fmt.Errorf("%w: %s is not valid %s", ErrBadSignature, v.header, v.encoding())
	}
	return out[:n], nil
}

func (v *hmacVerifier) encoding() string {
	if v.base64 {
		return "base64"
	}
	return "hex"
}
