package provider

// Detached JWS signatures (pubkey.encoding: jws): the signature header
// holds a compact JWS (RFC 7515) whose payload is the body, left out —
// "<protected header>..<signature>", both base64url — and the key is the
// one the protected header's "kid" names (of a key set, jwks.go; or any
// configured key). The signed content is the JWS signing input: the
// header's base64url text, ".", and the body's base64url, or the body's
// bytes as they are when the header says "b64": false (RFC 7797).
//
// The header is the sender's claim until the signature verifies, so it
// is bounded and read strictly: "alg" must be the configured algorithm's
// (never "none", never another family's: no algorithm confusion); a
// "crit" may list only "b64", the one extension understood; the payload
// part must be empty (the body is the payload). Anything else is 401.

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// maxJWSHeaderBytes bounds a JWS protected header (decoded).
const maxJWSHeaderBytes = 1024

// detachedJWS is a parsed compact JWS with its payload detached.
type detachedJWS struct {
	header64 string // the protected header as sent: part of the signed content
	b64      bool   // the payload is signed as base64url (RFC 7515), else as it is (RFC 7797)
	kid      string
	sig      []byte
}

// parseDetachedJWS reads s for algorithm alg (a pubkey.algorithm).
func parseDetachedJWS(s, alg string) (detachedJWS, error) {
	header64, rest, ok := strings.Cut(s, ".")
	payload, sig64, ok2 := strings.Cut(rest, ".")
	switch {
	case !ok || !ok2:
		return detachedJWS{}, fmt.Errorf("%w: not a compact JWS", ErrBadSignature)
	case payload != "":
		return detachedJWS{}, fmt.Errorf("%w: the JWS carries a payload; the body is its payload (detached)", ErrBadSignature)
	case len(header64) > base64.RawURLEncoding.EncodedLen(maxJWSHeaderBytes):
		return detachedJWS{}, fmt.Errorf("%w: the JWS header is too long", ErrBadSignature)
	}
	rawHeader, err := base64.RawURLEncoding.Strict().DecodeString(header64)
	if err != nil {
		return detachedJWS{}, fmt.Errorf("%w: the JWS header is not base64url", ErrBadSignature)
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(sig64)
	if err != nil || len(sig) == 0 {
		return detachedJWS{}, fmt.Errorf("%w: the JWS signature is not base64url", ErrBadSignature)
	}
	j := detachedJWS{header64: header64, b64: true, sig: sig}
	h, err := readJWSHeader(rawHeader)
	if err != nil {
		return detachedJWS{}, err
	}
	if !slices.Contains(jwsAlgs[alg], h.alg) {
		return detachedJWS{}, fmt.Errorf("%w: the JWS alg is not %s's", ErrBadSignature, alg)
	}
	for _, c := range h.crit {
		if c != "b64" {
			return detachedJWS{}, fmt.Errorf("%w: the JWS header has a critical extension not understood", ErrBadSignature)
		}
	}
	if h.b64 != nil {
		// RFC 7797: b64 must be listed in crit to mean anything.
		if !slices.Contains(h.crit, "b64") {
			return detachedJWS{}, fmt.Errorf("%w: the JWS header has b64 without crit", ErrBadSignature)
		}
		j.b64 = *h.b64
	}
	if h.kid != nil {
		if *h.kid == "" || len(*h.kid) > maxKIDBytes {
			return detachedJWS{}, fmt.Errorf("%w: the JWS kid is empty or too long", ErrBadSignature)
		}
		j.kid = *h.kid
	}
	return j, nil
}

// jwsHeader is what a protected header says, read by exact member name.
type jwsHeader struct {
	alg  string
	kid  *string
	b64  *bool
	crit []string
}

// readJWSHeader reads a protected header strictly: UTF-8 JSON, an object whose
// member names (RFC 7515: case-sensitive) appear once, also in another
// letter case (encoding/json would read "ALG" as alg, and the last of two
// copies), "alg" and "kid" strings, "b64" a boolean, "crit" strings.
func readJWSHeader(raw []byte) (jwsHeader, error) {
	bad := func(what string) (jwsHeader, error) {
		return jwsHeader{}, fmt.Errorf("%w: the JWS header %s", ErrBadSignature, what)
	}
	if !gjson.ValidBytes(raw) || !utf8.Valid(raw) {
		// gjson hands invalid UTF-8 back as it is, encoding/json replaces
		// it: one header, two readings.
		return bad("is not JSON in UTF-8")
	}
	obj := gjson.ParseBytes(raw)
	if !obj.IsObject() {
		return bad("is not a JSON object")
	}
	var h jwsHeader
	seen := map[string]bool{}
	ok := true
	obj.ForEach(func(k, v gjson.Result) bool {
		name := strings.ToLower(k.Str)
		if seen[name] {
			ok = false
			return false
		}
		seen[name] = true
		switch k.Str {
		case "alg":
			h.alg, ok = v.Str, v.Type == gjson.String
		case "kid":
			h.kid, ok = &v.Str, v.Type == gjson.String
		case "b64":
			b := v.Bool()
			h.b64, ok = &b, v.IsBool()
		case "crit":
			ok = v.IsArray()
			v.ForEach(func(_, c gjson.Result) bool {
				h.crit, ok = append(h.crit, c.Str), ok && c.Type == gjson.String
				return ok
			})
		}
		return ok
	})
	if !ok {
		return bad("repeats a member or has one of the wrong type")
	}
	return h, nil
}

// signingInput is the content the JWS signs over body.
func (j detachedJWS) signingInput(body []byte) []byte {
	n := len(body)
	if j.b64 {
		n = base64.RawURLEncoding.EncodedLen(len(body))
	}
	msg := make([]byte, 0, len(j.header64)+1+n)
	msg = append(msg, j.header64...)
	msg = append(msg, '.')
	if j.b64 {
		return base64.RawURLEncoding.AppendEncode(msg, body)
	}
	return append(msg, body...)
}
