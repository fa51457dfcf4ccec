package envelope

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"hash"
	"strconv"
	"strings"

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

// Sign returns the Intake-Envelope-Signature value of h under key.
func Sign(key []byte, h nats.Header) string {
	var sum [sha256.Size]byte
	mac := envelopeMAC(hmac.New(sha256.New, key), h, sum[:0])
	b := make([]byte, 0, len(signatureVersion)+1+base64.RawURLEncoding.EncodedLen(sha256.Size))
	b = append(b, signatureVersion...)
	b = append(b, '=')
	b = base64.RawURLEncoding.AppendEncode(b, mac)
	return string(b)
}

// envelopeMAC writes the canonical encoding of h's signed headers into mac
// and appends the sum to out: the version, then for each value '\n', its
// decimal length, ':' and the bytes, so no two header sets encode alike.
// One buffer, one Write: a few hundred bytes.
func envelopeMAC(mac hash.Hash, h nats.Header, out []byte) []byte {
	var stack [512]byte
	b := append(stack[:0], signatureVersion...)
	for _, name := range signedHeaders {
		v := h.Get(name)
		b = append(b, '\n')
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	mac.Write(b)
	return mac.Sum(out)
}

// VerifySignature checks h's Intake-Envelope-Signature against keys (any
// one verifying is enough: rotation), in constant time per key.
// ErrUnsigned when there is none, ErrBadSignature when it fails.
func VerifySignature(keys [][]byte, h nats.Header) error {
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
	for _, key := range keys {
		if hmac.Equal(envelopeMAC(hmac.New(sha256.New, key), h, sum[:0]), got) {
			return nil
		}
	}
	return ErrBadSignature
}

// parseSignature reads "v1=<base64url HMAC-SHA256>".
func parseSignature(v string) ([]byte, bool) {
	enc, ok := strings.CutPrefix(v, signatureVersion+"=")
	if !ok || len(enc) != base64.RawURLEncoding.EncodedLen(sha256.Size) {
		return nil, false
	}
	mac, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(mac) != sha256.Size {
		return nil, false
	}
	return mac, true
}
