package envelope

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"hash"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// HeaderSignature is ingress's HMAC over the envelope headers the processor
// trusts (Sign): "v1=" and the base64url (unpadded) HMAC-SHA256. Whoever may
// publish to intake.in.> but holds no envelope key cannot write a key,
// tenant, payload hash or object version the processor applies.
const HeaderSignature = "Intake-Envelope-Signature"

// signatureVersion prefixes the header value and the signed bytes: a
// later scheme gets its own and cannot be read as this one.
const signatureVersion = "v1"

// signedHeaders are what Sign covers, in this order: Intake-Key (what the
// processor reads the key from) and its parts as well. Object id and
// version are "" when absent.
var signedHeaders = [...]string{
	HeaderKey, HeaderIntegration, HeaderAccount, HeaderEventID, HeaderTenant, HeaderEventType,
	HeaderPayloadSHA256, HeaderReceivedAt, HeaderObjectID, HeaderObjectVersion,
}

// Errors of VerifySignature.
var (
	// ErrUnsigned: the message has no Intake-Envelope-Signature.
	ErrUnsigned = errors.New("envelope: no " + HeaderSignature)
	// ErrBadSignature: a signature is present and no key verifies it, or
	// it does not parse, or there are several.
	ErrBadSignature = errors.New("envelope: " + HeaderSignature + " does not verify")
)

// Sign returns the Intake-Envelope-Signature value of h under key. For
// one key and many messages (ingress), a Signer costs less.
func Sign(key []byte, h nats.Header) string { return NewSigner(key).Sign(h) }

// Signer signs envelopes under one key, keeping its HMAC states and
// buffers for reuse: ingress signs every delivery, and a fresh HMAC is
// most of a signature's allocations. Safe for concurrent use.
type Signer struct{ pool sync.Pool }

// signerState is one reusable HMAC with its encoding buffer.
type signerState struct {
	mac hash.Hash
	buf []byte
}

// NewSigner is a Signer under key.
func NewSigner(key []byte) *Signer {
	s := &Signer{}
	s.pool.New = func() any { return &signerState{mac: hmac.New(sha256.New, key), buf: make([]byte, 0, 512)} }
	return s
}

// Sign returns the Intake-Envelope-Signature value of h.
func (s *Signer) Sign(h nats.Header) string {
	var sum [sha256.Size]byte
	var b [len(signatureVersion) + 1 + 43]byte // 43: base64url of 32 bytes, unpadded
	out := append(b[:0], signatureVersion...)
	out = append(out, '=')
	out = base64.RawURLEncoding.AppendEncode(out, s.sum(h, sum[:0]))
	return string(out)
}

// sum appends h's envelope MAC under the Signer's key to out.
func (s *Signer) sum(h nats.Header, out []byte) []byte {
	st := s.pool.Get().(*signerState)
	st.mac.Reset()
	st.buf, out = envelopeMAC(st.mac, h, st.buf[:0], out)
	s.pool.Put(st)
	return out
}

// Verifier checks envelope signatures against keys, any one verifying
// being enough (rotation), each key keeping its HMAC states for reuse as a
// Signer does: the processor verifies every message. Safe for concurrent
// use.
type Verifier struct{ keys []*Signer }

// NewVerifier is a Verifier under keys.
func NewVerifier(keys [][]byte) *Verifier {
	v := &Verifier{keys: make([]*Signer, len(keys))}
	for i, k := range keys {
		v.keys[i] = NewSigner(k)
	}
	return v
}

// Verify checks h's Intake-Envelope-Signature, in constant time per key.
// ErrUnsigned when there is none, ErrBadSignature when it fails.
func (v *Verifier) Verify(h nats.Header) error {
	vals := h.Values(HeaderSignature)
	if len(vals) == 0 {
		return ErrUnsigned
	}
	if len(vals) > 1 {
		return ErrBadSignature // one signature, or which one was meant?
	}
	got, ok := parseSignature(vals[0])
	if !ok {
		return ErrBadSignature
	}
	var sum [sha256.Size]byte
	for _, k := range v.keys {
		if hmac.Equal(k.sum(h, sum[:0]), got) {
			return nil
		}
	}
	return ErrBadSignature
}

// envelopeMAC writes the canonical encoding of h's signed headers into mac
// (through buf, returned for reuse) and appends the sum to out: the
// version, then for each value '\n', its decimal length, ':' and the
// bytes, so no two header sets encode alike. One Write: a few hundred
// bytes.
func envelopeMAC(mac hash.Hash, h nats.Header, buf, out []byte) ([]byte, []byte) {
	b := append(buf, signatureVersion...)
	for _, name := range signedHeaders {
		v := h.Get(name)
		b = append(b, '\n')
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	mac.Write(b)
	return b, mac.Sum(out)
}

// VerifySignature checks h's Intake-Envelope-Signature against keys (any
// one verifying is enough: rotation), in constant time per key.
// ErrUnsigned when there is none, ErrBadSignature when it fails. For many
// messages under the same keys (the processor), a Verifier costs less.
func VerifySignature(keys [][]byte, h nats.Header) error { return NewVerifier(keys).Verify(h) }

var strictBase64 = base64.RawURLEncoding.Strict()

// parseSignature reads "v1=<base64url HMAC-SHA256>", strictly: the 43rd
// character carries two unused bits, and a value that sets them names the
// same MAC in another spelling, which is not the signature ingress wrote.
func parseSignature(v string) ([]byte, bool) {
	enc, ok := strings.CutPrefix(v, signatureVersion+"=")
	if !ok || len(enc) != base64.RawURLEncoding.EncodedLen(sha256.Size) {
		return nil, false
	}
	mac, err := strictBase64.DecodeString(enc)
	if err != nil || len(mac) != sha256.Size {
		return nil, false
	}
	return mac, true
}
