package provider

// Public-key signatures with a configured key (provider pubkey): the sender
// signs pubkey.template ("{body}" by default; "{timestamp}{body}" for
// Discord, SendGrid) with its private key and the receiver holds only the
// public key, so a leaked receiver config forges nothing. Algorithms:
//
//   - ed25519 (Discord): the signature over the message itself;
//   - ecdsa-p256 (SendGrid): ECDSA over SHA-256, ASN.1 DER or raw r‖s;
//   - rsa-pkcs1v15 and rsa-pss: RSA over SHA-256 (keys of 2048 bits or more).
//
// Keys are configured in secrets, one per entry (rotation as usual): PEM
// ("PUBLIC KEY", or "RSA PUBLIC KEY"), base64 of the DER
// SubjectPublicKeyInfo, or for ed25519 the raw 32 bytes in hex or base64.
// Or they are the sender's published key set, fetched from pubkey.key_url
// (a JWKS; jwks.go), the key picked by the id in pubkey.kid_header or, with
// pubkey.encoding jws, in the signature's own JWS header (jws.go). The
// timestamp, template and unsigned-id rules are hmac's.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/textproto"
	"net/url"
	"strings"
	"time"
)

// PubKeyConfig configures provider pubkey.
type PubKeyConfig struct {
	// Algorithm: ed25519, ecdsa-p256, rsa-pkcs1v15 or rsa-pss. Required.
	Algorithm string `yaml:"algorithm,omitempty"`
	// Header carrying the signature. Required.
	Header string `yaml:"header,omitempty"`
	// Encoding of the signature: base64 (default), hex, or jws: a compact
	// JWS with the body as its detached payload, whose header names the
	// algorithm and the key id (jws.go); then the signed content is the
	// JWS's, so template and timestamp_header are not set.
	Encoding string `yaml:"encoding,omitempty"`
	// Prefix stripped from the header value before decoding. Defaults to none.
	Prefix string `yaml:"prefix,omitempty"`
	// TimestampHeader, TimestampFormat and Template as in hmac; the
	// template's placeholders are {timestamp} and {body}.
	TimestampHeader string `yaml:"timestamp_header,omitempty"`
	TimestampFormat string `yaml:"timestamp_format,omitempty"`
	Template        string `yaml:"template,omitempty"`
	// AllowUnsignedID accepts an event_id.header (never signed here).
	AllowUnsignedID bool `yaml:"allow_unsigned_id,omitempty"`
	// KeyURL is the https URL of the sender's key set (a JWKS, RFC 7517),
	// fetched by ingress instead of keys in secrets, which must then be
	// empty. Its host must be on key_url_hosts, which defaults to that
	// host. Defaults to none: the keys are the secrets.
	KeyURL string `yaml:"key_url,omitempty"`
	// KIDHeader names the header carrying the id (kid) of the set's key
	// that signed the delivery. Only with key_url, and not with encoding
	// jws (the JWS header names it). Defaults to none: every key of the
	// set is tried.
	KIDHeader string `yaml:"kid_header,omitempty"`
}

// minRSABits refuses keys that are too short to mean anything.
const minRSABits = 2048

type pubKeyVerifier struct {
	alg       string
	header    string
	prefix    string
	hexSig    bool
	jws       bool // pubkey.encoding jws
	tsHeader  string
	tsFormat  timestampFormat
	template  []templatePart
	tolerance time.Duration
	keys      []crypto.PublicKey
	jwks      *jwksFetcher // pubkey.key_url; nil: keys
	kidHeader string       // canonical; "" when none
	identity  identityReader
}

func newPubKey(cfg Config) (Verifier, error) {
	c := cfg.PubKey
	v := &pubKeyVerifier{alg: strings.ToLower(c.Algorithm), prefix: c.Prefix, tolerance: cfg.Tolerance}
	switch v.alg {
	case "ed25519", "ecdsa-p256", "rsa-pkcs1v15", "rsa-pss":
	case "":
		return nil, fmt.Errorf("pubkey.algorithm: required (ed25519, ecdsa-p256, rsa-pkcs1v15 or rsa-pss)")
	default:
		return nil, fmt.Errorf("pubkey.algorithm: unknown %q (ed25519, ecdsa-p256, rsa-pkcs1v15 or rsa-pss)", c.Algorithm)
	}
	if c.Header == "" || !validHeaderName(c.Header) {
		return nil, fmt.Errorf("pubkey.header: required, a valid header name")
	}
	v.header = textproto.CanonicalMIMEHeaderKey(c.Header)
	switch strings.ToLower(c.Encoding) {
	case "", "base64":
	case "hex":
		v.hexSig = true
	case "jws":
		v.jws = true
		switch {
		case c.Template != "" && c.Template != "{body}" || c.TimestampHeader != "":
			return nil, fmt.Errorf("pubkey.encoding: jws signs the body as its detached payload; pubkey.template and pubkey.timestamp_header are not for it")
		case c.KIDHeader != "":
			return nil, fmt.Errorf("pubkey.kid_header: not with pubkey.encoding jws (the JWS header names the key)")
		}
	default:
		return nil, fmt.Errorf("pubkey.encoding: unknown %q (base64, hex or jws)", c.Encoding)
	}
	if err := v.configureKeys(cfg); err != nil {
		return nil, err
	}
	var err error
	if v.tsFormat, err = parseTimestampFormat(c.TimestampFormat); err != nil {
		return nil, fmt.Errorf("pubkey.timestamp_format: %w", err)
	}
	tmpl, err := expandRequestPlaceholders("pubkey.template", orDefault(c.Template, "{body}"), cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	if v.template, err = parseTemplate(tmpl); err != nil {
		return nil, fmt.Errorf("pubkey.template: %w", err)
	}
	signsTS := false
	for _, p := range v.template {
		switch p.placeholder {
		case "id":
			return nil, fmt.Errorf("pubkey.template: {id} is not available here (placeholders: {timestamp}, {body})")
		case "timestamp":
			signsTS = true
		}
	}
	switch {
	case c.TimestampHeader != "" && !signsTS:
		return nil, fmt.Errorf("pubkey.template: must sign {timestamp} when pubkey.timestamp_header is set; an unsigned timestamp stops no replay")
	case c.TimestampHeader == "" && signsTS:
		return nil, fmt.Errorf("pubkey.template: {timestamp} needs pubkey.timestamp_header")
	case c.TimestampHeader != "":
		if !validHeaderName(c.TimestampHeader) {
			return nil, fmt.Errorf("pubkey.timestamp_header: %q is not a valid header name", c.TimestampHeader)
		}
		v.tsHeader = textproto.CanonicalMIMEHeaderKey(c.TimestampHeader)
	}
	adjacent, err := checkAdjacency(v.template, fixedFormats{timestamp: true})
	if err != nil {
		return nil, fmt.Errorf("pubkey.template: %w", err)
	}
	if adjacent["timestamp"] {
		if err := checkAdjacentTolerance(v.tsFormat, cfg.Tolerance); err != nil {
			return nil, fmt.Errorf("tolerance: %w", err)
		}
	}
	if cfg.EventID.IsZero() && cfg.Split.IsZero() {
		return nil, fmt.Errorf("event_id: header or field required for provider pubkey")
	}
	if cfg.EventID.Header != "" && !c.AllowUnsignedID {
		return nil, fmt.Errorf("event_id.header: %s is not signed: a captured delivery replayed under a new id would be a new event; "+
			"use event_id.field, or accept the risk with pubkey.allow_unsigned_id: true", cfg.EventID.Header)
	}
	if v.identity, err = newIdentity(cfg, identityFields{}); err != nil {
		return nil, err
	}
	return v, nil
}

// configureKeys reads the keys in secrets, or sets up the key set at
// pubkey.key_url.
func (v *pubKeyVerifier) configureKeys(cfg Config) error {
	c := cfg.PubKey
	if c.KeyURL == "" {
		if c.KIDHeader != "" {
			return fmt.Errorf("pubkey.kid_header: needs pubkey.key_url (configured keys have no ids)")
		}
		for i, s := range cfg.Secrets {
			k, err := parsePublicKey(v.alg, s)
			if err != nil {
				return fmt.Errorf("secrets[%d]: %w", i, err)
			}
			v.keys = append(v.keys, k)
		}
		return nil
	}
	if len(cfg.Secrets) > 0 {
		return fmt.Errorf("secrets: not with pubkey.key_url (the keys come from the key set)")
	}
	u, err := url.Parse(c.KeyURL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return fmt.Errorf("pubkey.key_url: an https URL of a JWKS")
	}
	hosts := cfg.KeyURLHosts
	if len(hosts) == 0 {
		hosts = []string{u.Hostname()}
	}
	if err := checkHosts(hosts); err != nil {
		return err
	}
	v.jwks = newJWKSFetcher(v.alg, c.KeyURL, hosts)
	if !v.jwks.allowed(c.KeyURL) {
		return fmt.Errorf("pubkey.key_url: its host is not on key_url_hosts (or the URL has user information or a fragment)")
	}
	if c.KIDHeader != "" {
		if !validHeaderName(c.KIDHeader) {
			return fmt.Errorf("pubkey.kid_header: %q is not a valid header name", c.KIDHeader)
		}
		v.kidHeader = textproto.CanonicalMIMEHeaderKey(c.KIDHeader)
	}
	return nil
}

// parsePublicKey reads one configured key for alg. Messages never quote it.
func parsePublicKey(alg, s string) (crypto.PublicKey, error) {
	s = strings.TrimSpace(s)
	var der []byte
	if block, _ := pem.Decode([]byte(s)); block != nil {
		if block.Type == "RSA PUBLIC KEY" && strings.HasPrefix(alg, "rsa") {
			k, err := x509.ParsePKCS1PublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("not an RSA public key")
			}
			return checkRSA(k)
		}
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("a PEM %q block is no public key (want PUBLIC KEY)", block.Type)
		}
		der = block.Bytes
	} else if alg == "ed25519" {
		if raw, err := hex.DecodeString(s); err == nil && len(raw) == ed25519.PublicKeySize {
			return ed25519.PublicKey(raw), nil
		}
		if raw, err := base64.StdEncoding.DecodeString(s); err == nil && len(raw) == ed25519.PublicKeySize {
			return ed25519.PublicKey(raw), nil
		}
	}
	if der == nil {
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("not a public key (PEM, or base64 of DER SubjectPublicKeyInfo)")
		}
		der = raw
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("not a public key (PEM, or base64 of DER SubjectPublicKeyInfo)")
	}
	switch k := k.(type) {
	case ed25519.PublicKey:
		if alg == "ed25519" {
			return k, nil
		}
	case *ecdsa.PublicKey:
		if alg == "ecdsa-p256" && k.Curve == elliptic.P256() {
			return k, nil
		}
	case *rsa.PublicKey:
		if strings.HasPrefix(alg, "rsa") {
			return checkRSA(k)
		}
	}
	return nil, fmt.Errorf("the key is a %T, not a key for %s", k, alg)
}

func checkRSA(k *rsa.PublicKey) (crypto.PublicKey, error) {
	if k.N.BitLen() < minRSABits {
		return nil, fmt.Errorf("RSA key of %d bits; at least %d", k.N.BitLen(), minRSABits)
	}
	return k, nil
}

func (v *pubKeyVerifier) Verify(d *Request) (Identity, error) {
	sig := d.Header.Get(v.header)
	if sig == "" {
		return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, v.header)
	}
	var ts string
	if v.tsHeader != "" {
		if ts = d.Header.Get(v.tsHeader); ts == "" {
			return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, v.tsHeader)
		}
		t, err := v.tsFormat.parse(ts, true)
		if err == nil {
			err = windowBoth.check(t, d.now(), v.tolerance)
		}
		if err != nil {
			return Identity{}, fmt.Errorf("%w (%s)", err, v.tsHeader)
		}
	}
	rest, ok := strings.CutPrefix(sig, v.prefix)
	if !ok {
		return Identity{}, fmt.Errorf("%w: %s lacks the configured prefix", ErrBadSignature, v.header)
	}
	// A signature is at most 512 bytes (RSA-4096); anything longer is junk
	// not worth decoding. A JWS adds its header.
	if len(rest) > 1100 && !v.jws || len(rest) > 1100+maxJWSHeaderBytes*4/3+2 {
		return Identity{}, fmt.Errorf("%w: %s is too long", ErrBadSignature, v.header)
	}
	var raw, msg []byte
	var kid string
	if v.jws {
		j, err := parseDetachedJWS(rest, v.alg)
		if err != nil {
			return Identity{}, fmt.Errorf("%w (%s)", err, v.header)
		}
		raw, msg, kid = j.sig, j.signingInput(d.Body), j.kid
	} else {
		var err error
		if v.hexSig {
			raw, err = hex.DecodeString(rest)
		} else {
			raw, err = base64.StdEncoding.DecodeString(rest)
		}
		if err != nil || len(raw) == 0 {
			return Identity{}, fmt.Errorf("%w: %s is not valid %s", ErrBadSignature, v.header, map[bool]string{true: "hex", false: "base64"}[v.hexSig])
		}
		for _, p := range v.template {
			switch p.placeholder {
			case "body":
				msg = append(msg, d.Body...)
			case "timestamp":
				msg = append(msg, ts...)
			default:
				msg = append(msg, p.literal...)
			}
		}
	}
	keys, err := v.keysFor(d, kid)
	if err != nil {
		return Identity{}, err
	}
	digest := sha256.Sum256(msg)
	idx := -1
	for i, k := range keys {
		if v.verifyOne(k, msg, digest[:], raw) {
			idx = i
			break
		}
	}
	if idx < 0 {
		return Identity{}, fmt.Errorf("%w: %s does not verify under any configured key", ErrBadSignature, v.header)
	}
	if v.jwks != nil {
		idx = 0 // a key of the set, not a secret: no rotation to report
	}
	ev := Identity{SecretIndex: idx}
	body := jsonBody{raw: d.Body}
	if err := v.identity.read(d.Header, &body, &ev); err != nil {
		return Identity{}, err
	}
	return ev, nil
}

// keysFor returns the keys d may be signed with: the configured ones, or
// those of the key set for its kid (jwsKID: the JWS header's), fetched
// last, once everything else about the request has been checked.
func (v *pubKeyVerifier) keysFor(d *Request, jwsKID string) ([]crypto.PublicKey, error) {
	if v.jwks == nil {
		return v.keys, nil
	}
	kid := jwsKID
	if v.kidHeader != "" {
		if kid = d.Header.Get(v.kidHeader); kid == "" {
			return nil, fmt.Errorf("%w: %s", ErrMissingHeader, v.kidHeader)
		}
		if len(kid) > maxKIDBytes {
			return nil, fmt.Errorf("%w: %s is too long", ErrBadSignature, v.kidHeader)
		}
	}
	return v.jwks.keys(kid, d.now())
}

func (v *pubKeyVerifier) verifyOne(k crypto.PublicKey, msg, digest, sig []byte) bool {
	switch k := k.(type) {
	case ed25519.PublicKey:
		return len(sig) == ed25519.SignatureSize && ed25519.Verify(k, msg, sig)
	case *ecdsa.PublicKey:
		if len(sig) == 64 { // raw r‖s
			r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
			return ecdsa.Verify(k, digest, r, s)
		}
		return ecdsa.VerifyASN1(k, digest, sig)
	case *rsa.PublicKey:
		if v.alg == "rsa-pss" {
			return rsa.VerifyPSS(k, crypto.SHA256, digest, sig, nil) == nil
		}
		return rsa.VerifyPKCS1v15(k, crypto.SHA256, digest, sig) == nil
	}
	return false
}
