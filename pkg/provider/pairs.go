package provider

// Stripe's shape, parameterised (provider pairs): one header holds a list of
// key/value pairs, one of them the send time and one or more the signature,
// e.g. Stripe's "t=1700000000,v1=…,v1=…", Paddle's "ts=…;h1=…", WorkOS's
// "t=<ms>, v1=…". The MAC (HMAC-SHA256 by default) is over pairs.template,
// "{timestamp}.{body}" by default, keyed with the secret's bytes as written.
// The timestamp may instead come from its own header (pairs.timestamp_header),
// in unix seconds, milliseconds or RFC 3339, bounded on both sides of now or,
// like Stripe's and WorkOS's libraries, in the past only.
//
// Parsing follows stripe-go where the providers agree: every pair must be
// key/value with no second key/value separator in the value, unknown keys
// are ignored, a signature entry of the wrong length or encoding is
// skipped, the last timestamp wins, any signature entry may match. Stricter:
// a unix timestamp must be canonical digits (no sign, no leading zero), so
// the text signed is the only spelling of the time. The stripe provider
// keeps its own file (its hot path is measured); FuzzPairsStripeDifferential
// holds this family, configured as Stripe, to stripe-go and to it.
//
// The scheme names no event id: event_id is required (a preset gives one).
// An id from a header is never signed here, so it needs
// pairs.allow_unsigned_id and turns the replay guard on by default.

import (
	"crypto/hmac"
	"fmt"
	"hash"
	"net/textproto"
	"strings"
	"time"

	"github.com/intakehq/intake/internal/hmacpool"
)

// PairsConfig configures provider pairs (and the presets built on it).
type PairsConfig struct {
	// Header carrying the pairs. Required.
	Header string `yaml:"header,omitempty"`
	// PairSeparator separates the pairs. Defaults to ",".
	PairSeparator string `yaml:"pair_separator,omitempty"`
	// KVSeparator separates a key from its value. Defaults to "=".
	KVSeparator string `yaml:"kv_separator,omitempty"`
	// TimestampKey is the pair holding the send time. Defaults to "t"
	// unless TimestampHeader is set.
	TimestampKey string `yaml:"timestamp_key,omitempty"`
	// TimestampHeader reads the send time from its own header instead of a
	// pair. Defaults to none.
	TimestampHeader string `yaml:"timestamp_header,omitempty"`
	// TimestampFormat: unix (seconds, the default), unix_ms or rfc3339.
	TimestampFormat string `yaml:"timestamp_format,omitempty"`
	// Window: both (± tolerance, the default) or past (no older than
	// tolerance; any future time passes, as stripe-go and workos-go do).
	Window string `yaml:"window,omitempty"`
	// SignatureKey names the signature pairs; any of them may match.
	// Defaults to "v1".
	SignatureKey string `yaml:"signature_key,omitempty"`
	// Template is the signed content over {timestamp} and {body}. Defaults
	// to "{timestamp}.{body}".
	Template string `yaml:"template,omitempty"`
	// Algorithm: sha256 (default), sha512 or sha1.
	Algorithm string `yaml:"algorithm,omitempty"`
	// Encoding of each signature: hex (default) or base64.
	Encoding string `yaml:"encoding,omitempty"`
	// AllowUnsignedID accepts an event_id.header (never signed here).
	AllowUnsignedID bool `yaml:"allow_unsigned_id,omitempty"`
}

// maxPairSignatures bounds the signature entries kept per delivery, so a
// header stuffed with entries buys no more MACs than a rotation needs.
const maxPairSignatures = 8

type pairsVerifier struct {
	header, pairSep, kvSep    string
	tsKey, sigKey             string
	tsHeader                  string // canonical; "" when the timestamp is a pair
	tsFormat                  timestampFormat
	window                    timeWindow
	template                  []templatePart
	size                      int
	base64                    bool
	tolerance                 time.Duration
	keys                      []*hmacpool.Key // pairs.algorithm, one per secret
	identity                  identityReader
	headerName, timestampName string // for messages
}

func newPairs(cfg Config) (Verifier, error) {
	c := cfg.Pairs
	if c.Header == "" {
		return nil, fmt.Errorf("pairs.header: required for provider pairs")
	}
	if !validHeaderName(c.Header) {
		return nil, fmt.Errorf("pairs.header: %q is not a valid header name", c.Header)
	}
	v := &pairsVerifier{
		header:    textproto.CanonicalMIMEHeaderKey(c.Header),
		pairSep:   orDefault(c.PairSeparator, ","),
		kvSep:     orDefault(c.KVSeparator, "="),
		sigKey:    orDefault(c.SignatureKey, "v1"),
		tolerance: cfg.Tolerance,
	}
	if v.pairSep == v.kvSep || strings.Contains(v.pairSep, v.kvSep) || strings.Contains(v.kvSep, v.pairSep) {
		return nil, fmt.Errorf("pairs.pair_separator: must differ from pairs.kv_separator and not contain it")
	}
	var err error
	if c.TimestampHeader != "" {
		if c.TimestampKey != "" {
			return nil, fmt.Errorf("pairs.timestamp_key: not with pairs.timestamp_header (the time comes from one place)")
		}
		if !validHeaderName(c.TimestampHeader) {
			return nil, fmt.Errorf("pairs.timestamp_header: %q is not a valid header name", c.TimestampHeader)
		}
		v.tsHeader = textproto.CanonicalMIMEHeaderKey(c.TimestampHeader)
		v.timestampName = v.tsHeader
	} else {
		v.tsKey = orDefault(c.TimestampKey, "t")
		v.timestampName = v.header + " " + v.tsKey
	}
	if v.tsKey != "" && v.tsKey == v.sigKey {
		return nil, fmt.Errorf("pairs.signature_key: must differ from pairs.timestamp_key")
	}
	for name, s := range map[string]string{"pair_separator": v.pairSep, "kv_separator": v.kvSep, "timestamp_key": v.tsKey, "signature_key": v.sigKey} {
		if strings.ContainsAny(s, "\r\n") || (name != "timestamp_key" && s == "") {
			return nil, fmt.Errorf("pairs.%s: must be printable text", name)
		}
	}
	if v.tsFormat, err = parseTimestampFormat(c.TimestampFormat); err != nil {
		return nil, fmt.Errorf("pairs.timestamp_format: %w", err)
	}
	if v.window, err = parseWindow(c.Window); err != nil {
		return nil, fmt.Errorf("pairs.window: %w", err)
	}
	var newHash func() hash.Hash
	if newHash, v.size, err = macAlgorithm(c.Algorithm); err != nil {
		return nil, fmt.Errorf("pairs.algorithm: %w", err)
	}
	v.keys = hmacKeys(newHash, cfg.Secrets)
	switch strings.ToLower(c.Encoding) {
	case "", "hex":
	case "base64":
		v.base64 = true
	default:
		return nil, fmt.Errorf("pairs.encoding: unknown %q (hex or base64)", c.Encoding)
	}
	tmpl, err := expandRequestPlaceholders("pairs.template", orDefault(c.Template, "{timestamp}.{body}"), cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	if v.template, err = parseTemplate(tmpl); err != nil {
		return nil, fmt.Errorf("pairs.template: %w", err)
	}
	signsTS := false
	for _, p := range v.template {
		switch p.placeholder {
		case "id":
			return nil, fmt.Errorf("pairs.template: {id} is not available here (placeholders: {timestamp}, {body})")
		case "timestamp":
			signsTS = true
		}
	}
	if !signsTS {
		return nil, fmt.Errorf("pairs.template: must sign {timestamp}; an unsigned timestamp stops no replay")
	}
	adjacent, err := checkAdjacency(v.template, fixedFormats{timestamp: true})
	if err != nil {
		return nil, fmt.Errorf("pairs.template: %w", err)
	}
	if adjacent["timestamp"] {
		if err := checkAdjacentTolerance(v.tsFormat, cfg.Tolerance); err != nil {
			return nil, fmt.Errorf("tolerance: %w", err)
		}
	}
	if cfg.EventID.IsZero() && cfg.Split.IsZero() {
		return nil, fmt.Errorf("event_id: header or field required for provider pairs")
	}
	if cfg.EventID.Header != "" && !c.AllowUnsignedID {
		return nil, fmt.Errorf("event_id.header: %s is not signed: a captured delivery replayed under a new id would be a new event; "+
			"use event_id.field, or accept the risk with pairs.allow_unsigned_id: true", cfg.EventID.Header)
	}
	if v.identity, err = newIdentity(cfg, identityFields{}); err != nil {
		return nil, err
	}
	v.headerName = v.header
	return v, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (v *pairsVerifier) Verify(d *Request) (Identity, error) {
	header := d.Header.Get(v.header)
	if header == "" {
		return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, v.header)
	}
	var sigBuf [maxPairSignatures][64 + 2]byte
	var sigArr [maxPairSignatures][]byte
	ts, t, sigs, err := v.parse(header, &sigBuf, sigArr[:0])
	if err != nil {
		return Identity{}, err
	}
	if v.tsHeader != "" {
		if ts = d.Header.Get(v.tsHeader); ts == "" {
			return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, v.tsHeader)
		}
		if t, err = v.tsFormat.parse(ts, true); err != nil {
			return Identity{}, fmt.Errorf("%w (%s)", err, v.timestampName)
		}
	}
	if ts == "" {
		return Identity{}, fmt.Errorf("%w: %s has no %s", ErrTimestamp, v.header, v.tsKey)
	}
	// Checked before any MAC work: cheap, and stale replays stop here.
	if err := v.window.check(t, d.now(), v.tolerance); err != nil {
		return Identity{}, fmt.Errorf("%w (%s)", err, v.timestampName)
	}
	if len(sigs) == 0 {
		return Identity{}, fmt.Errorf("%w: %s has no valid %s entry", ErrBadSignature, v.header, v.sigKey)
	}

	// The signed parts, built once for every key; the array keeps a
	// template of a few parts off the heap.
	var partBuf [8][]byte
	parts := partBuf[:0]
	for _, p := range v.template {
		switch p.placeholder {
		case "body":
			parts = append(parts, d.Body)
		case "timestamp":
			parts = append(parts, []byte(ts))
		default:
			parts = append(parts, []byte(p.literal))
		}
	}
	idx := -1
	var sumBuf [64]byte
	for i, key := range v.keys {
		sum := key.Sum(sumBuf[:0], parts...)
		for j := range sigs {
			if hmac.Equal(sum, sigs[j]) {
				idx = i
				break
			}
		}
		if idx >= 0 {
			break
		}
	}
	if idx < 0 {
		return Identity{}, fmt.Errorf("%w: no %s %s entry matches", ErrBadSignature, v.header, v.sigKey)
	}

	ev := Identity{SecretIndex: idx}
	body := jsonBody{raw: d.Body}
	if err := v.identity.read(d.Header, &body, &ev); err != nil {
		return Identity{}, err
	}
	return ev, nil
}

// parse reads the pairs: the last timestamp pair's value and time, and the
// decoded signature entries (in buf; at most maxPairSignatures). A pair
// without the key/value separator, or with a second one in its value, makes
// the whole header invalid, and so does any malformed timestamp pair, as in
// stripe-go. The timestamp is parsed canonical: the text signed is then the
// only spelling of its time.
func (v *pairsVerifier) parse(header string, buf *[maxPairSignatures][64 + 2]byte, sigs [][]byte) (string, time.Time, [][]byte, error) {
	var ts string
	var t time.Time
	for rest := header; ; {
		pair, after, more := strings.Cut(rest, v.pairSep)
		key, value, ok := strings.Cut(pair, v.kvSep)
		// base64's padding may end a value even when "=" separates keys.
		if inner := value; ok && v.base64 && v.kvSep == "=" {
			value = strings.TrimRight(inner, "=")
		}
		if !ok || strings.Contains(value, v.kvSep) {
			return "", time.Time{}, nil, fmt.Errorf("%w: %s is not a list of key%svalue pairs", ErrBadSignature, v.header, v.kvSep)
		}
		switch {
		case v.tsKey != "" && key == v.tsKey:
			var err error
			if t, err = v.tsFormat.parse(value, true); err != nil {
				return "", time.Time{}, nil, fmt.Errorf("%w (%s)", err, v.timestampName)
			}
			ts = value
		case key == v.sigKey && len(sigs) < maxPairSignatures:
			dst := buf[len(sigs)][:]
			if decodeMAC(dst, value, v.size, v.base64) {
				sigs = append(sigs, dst[:v.size])
			}
		}
		if !more {
			break
		}
		rest = after
	}
	return ts, t, sigs, nil
}
