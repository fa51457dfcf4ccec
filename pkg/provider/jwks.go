package provider

// Key sets (pubkey.key_url): the sender publishes its public keys as a
// JWKS (RFC 7517) at an https URL and names, in a header of each delivery
// (pubkey.kid_header), the id of the key that signed it. Ingress fetches
// the set as keyfetch.go fences every fetch (allowlist, 3 s, one fetch at
// a time, cached an hour) and:
//
//   - keeps only keys for pubkey.algorithm — OKP Ed25519 for ed25519, EC
//     P-256 for ecdsa-p256, RSA of 2048 to 8192 bits for rsa-pkcs1v15 and
//     rsa-pss — skipping one whose "use" is not "sig" or whose "alg" names
//     another algorithm; at most maxJWKSKeys;
//   - for a kid the cached set lacks (a rotation, or a made-up id) fetches
//     the set again, at most once per jwksRefetchInterval: still unknown
//     after that fetch is 401; unknown while the interval runs is 503 +
//     Retry-After (the set may have rotated since: the sender retries), so
//     made-up ids cost one fetch a minute and a genuine rotation at most a
//     retry;
//   - without kid_header, tries every key of the set;
//   - answers 503 + Retry-After (ErrUnavailable) when the set cannot be
//     fetched, does not parse or has no key for the algorithm.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"
)

const (
	// jwksRefetchInterval bounds the fetches an unknown kid causes.
	jwksRefetchInterval = time.Minute
	// maxJWKSKeys bounds the keys kept of one set (and tried without a kid).
	maxJWKSKeys = 32
	// maxKIDBytes bounds a kid read from a request.
	maxKIDBytes = 256
	// maxRSABits bounds an RSA key's size, and so a verification's cost.
	maxRSABits = 8192
)

// jwkSet is a fetched key set's keys for one algorithm.
type jwkSet struct {
	all   []crypto.PublicKey
	byKID map[string][]crypto.PublicKey
}

// jwksFetcher fetches one integration's key set.
type jwksFetcher struct {
	*keyFetcher[jwkSet]
	url string
}

func newJWKSFetcher(alg, keyURL string, hosts []string) *jwksFetcher {
	return &jwksFetcher{
		keyFetcher: newKeyFetcher(hosts, func(b []byte, _ time.Time) (jwkSet, time.Time, error) {
			set, err := parseJWKS(alg, b)
			return set, time.Time{}, err
		}),
		url: keyURL,
	}
}

// keys returns the keys to try for a delivery naming kid ("" for none).
func (f *jwksFetcher) keys(kid string, now time.Time) ([]crypto.PublicKey, error) {
	set, cached, err := f.lookup(f.url, now, -1)
	if err != nil {
		return nil, err
	}
	if kid == "" {
		return set.all, nil
	}
	if cached && len(set.byKID[kid]) == 0 {
		// Not in the cached set: a rotation since, or a made-up id.
		set, cached, err = f.refresh(f.url, now, jwksRefetchInterval)
		if err != nil {
			return nil, err
		}
	}
	switch {
	case len(set.byKID[kid]) > 0:
		return set.byKID[kid], nil
	case cached:
		// Fetched less than the interval ago: the sender retries after it.
		return nil, fmt.Errorf("%w: the key id is not in the key set fetched less than %s ago", ErrUnavailable, jwksRefetchInterval)
	}
	return nil, fmt.Errorf("%w: the key id is not in the key set", ErrBadSignature)
}

// jwk is the part of a JSON Web Key (RFC 7517, 7518, 8037) read here.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	X   string `json:"x"`
	Y   string `json:"y"`
	N   string `json:"n"`
	E   string `json:"e"`
}

// jwsAlgs are the JWS "alg" names of each pubkey.algorithm.
var jwsAlgs = map[string][]string{
	"ed25519":      {"EdDSA", "Ed25519"},
	"ecdsa-p256":   {"ES256"},
	"rsa-pkcs1v15": {"RS256"},
	"rsa-pss":      {"PS256"},
}

// parseJWKS reads a key set's keys for alg. A set that is no JWKS or has
// no key for alg is ErrUnavailable: the sender's published set (or the
// configuration) is wrong, not the delivery.
func parseJWKS(alg string, b []byte) (jwkSet, error) {
	var doc struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return jwkSet{}, fmt.Errorf("%w: the key set is not a JWKS", ErrUnavailable)
	}
	set := jwkSet{byKID: map[string][]crypto.PublicKey{}}
	for _, k := range doc.Keys {
		if len(set.all) == maxJWKSKeys {
			break
		}
		if k.Use != "" && k.Use != "sig" || k.Alg != "" && !slices.Contains(jwsAlgs[alg], k.Alg) {
			continue
		}
		pub, ok := k.publicKey(alg)
		if !ok {
			continue
		}
		set.all = append(set.all, pub)
		if k.Kid != "" {
			set.byKID[k.Kid] = append(set.byKID[k.Kid], pub)
		}
	}
	if len(set.all) == 0 {
		return jwkSet{}, fmt.Errorf("%w: the key set has no usable %s key", ErrUnavailable, alg)
	}
	return set, nil
}

// publicKey is k as a key for alg; false when it is another kind of key
// or malformed.
func (k jwk) publicKey(alg string) (crypto.PublicKey, bool) {
	switch {
	case alg == "ed25519" && k.Kty == "OKP" && k.Crv == "Ed25519":
		x, ok := b64url(k.X)
		if !ok || len(x) != ed25519.PublicKeySize {
			return nil, false
		}
		return ed25519.PublicKey(x), true
	case alg == "ecdsa-p256" && k.Kty == "EC" && k.Crv == "P-256":
		x, okx := b64url(k.X)
		y, oky := b64url(k.Y)
		if !okx || !oky || len(x) != 32 || len(y) != 32 {
			return nil, false
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		return pub, err == nil
	case strings.HasPrefix(alg, "rsa-") && k.Kty == "RSA":
		n, okn := b64url(k.N)
		e, oke := b64url(k.E)
		if !okn || !oke || len(e) == 0 || len(e) > 4 || len(n) == 0 || n[0] == 0 {
			return nil, false
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if bits := pub.N.BitLen(); bits < minRSABits || bits > maxRSABits || pub.E < 3 || pub.E%2 == 0 {
			return nil, false
		}
		return pub, true
	}
	return nil, false
}

// b64url decodes base64url without padding (RFC 7515), padding tolerated.
func b64url(s string) ([]byte, bool) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	return b, err == nil
}
