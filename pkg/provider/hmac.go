package provider

// Generic HMAC: the sender puts HMAC-SHA256 or HMAC-SHA512 of the signed
// content, keyed with the secret's bytes as written, hex or base64 encoded
// and optionally prefixed ("sha256=…"), in the header hmac.header.
//
// The signed content is hmac.template: "{body}" by default, or a template
// that also signs a timestamp header ("{timestamp}.{body}") and/or the event
// id header ("{id}.{timestamp}.{body}"). With hmac.timestamp_header set, the
// timestamp (unix seconds, or hmac.timestamp_format unix_ms or rfc3339) must
// lie within ± tolerance, and the template must sign it: an unsigned
// timestamp stops no replay. A sender that puts the time inside the signed
// body instead (Linear's webhookTimestamp) names it with
// hmac.timestamp_field; it is checked the same way once the MAC matched.
//
// The scheme names no event id, so event_id (a header or a body field) is
// required; event_type, object_id and object_version are optional. An id
// taken from a header the template does not sign can be changed by anyone
// replaying a captured delivery, which defeats deduplication: such a config
// needs hmac.allow_unsigned_id. Prefer a body field, or sign the header with
// "{id}". When both a header and a field are configured the signed field
// wins. Two placeholders side by side are refused unless the split between
// them is fixed by a strictly parsed format (checkAdjacency): "{id}{body}"
// with a free-form id would let one MAC verify every split of the same
// bytes, several ids for one signature; "{timestamp}{body}" or, with
// hmac.id_format uuid, "{id}{timestamp}{body}" cannot.

import (
	"fmt"
	"hash"
	"net/textproto"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/intakehq/intake/internal/hmacpool"
)

type hmacVerifier struct {
	header string // canonical
	prefix string
	size   int // MAC length in bytes
	base64 bool

	timestampHeader string // canonical; "" when none
	timestampField  string // a body path; "" when none
	tsFormat        timestampFormat
	// tsCanonical refuses leading zeros: the timestamp has a placeholder
	// beside it, and its extent must follow from its value (checkAdjacency).
	tsCanonical bool
	idUUID      bool   // hmac.id_format uuid: the signed id must be a UUID
	idHeader    string // canonical event_id header when the template signs {id}
	// idBounds are the template's bytes on either side of {id}: a signed id
	// must not contain them, or the same signed bytes would split into
	// another id and body ("{id}.{body}": id "a.{x" and the rest).
	idBounds  string
	template  []templatePart
	tolerance time.Duration

	keys     []*hmacpool.Key // hmac.algorithm, one per secret
	identity identityReader
}

// templatePart is a literal or one placeholder of hmac.template.
type templatePart struct {
	literal     string
	placeholder string // "body", "timestamp", "id"; "" for a literal
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
		header:    textproto.CanonicalMIMEHeaderKey(c.Header),
		prefix:    c.Prefix,
		tolerance: cfg.Tolerance,
	}
	var newHash func() hash.Hash
	var err error
	if newHash, v.size, err = macAlgorithm(c.Algorithm); err != nil {
		return nil, fmt.Errorf("hmac.algorithm: %w", err)
	}
	v.keys = hmacKeys(newHash, cfg.Secrets)
	if v.tsFormat, err = parseTimestampFormat(c.TimestampFormat); err != nil {
		return nil, fmt.Errorf("hmac.timestamp_format: %w", err)
	}
	switch c.IDFormat {
	case "":
	case "uuid":
		v.idUUID = true
	default:
		return nil, fmt.Errorf("hmac.id_format: unknown %q (uuid, or unset for any id)", c.IDFormat)
	}
	switch strings.ToLower(c.Encoding) {
	case "", "hex":
	case "base64":
		v.base64 = true
	default:
		return nil, fmt.Errorf("hmac.encoding: unknown %q (hex or base64)", c.Encoding)
	}
	if cfg.EventID.IsZero() && cfg.Split.IsZero() {
		return nil, fmt.Errorf("event_id: header or field required for provider hmac")
	}

	tmpl, err := expandRequestPlaceholders("hmac.template", orDefault(c.Template, "{body}"), cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	if v.template, err = parseTemplate(tmpl); err != nil {
		return nil, fmt.Errorf("hmac.template: %w", err)
	}
	adjacent, err := checkAdjacency(v.template, fixedFormats{timestamp: true, id: v.idUUID})
	if err != nil {
		return nil, fmt.Errorf("hmac.template: %w", err)
	}
	if adjacent["timestamp"] || digitBefore(v.template, "timestamp") {
		if err := checkAdjacentTolerance(v.tsFormat, cfg.Tolerance); err != nil {
			return nil, fmt.Errorf("tolerance: %w", err)
		}
		v.tsCanonical = true
	}
	signs := map[string]bool{}
	for _, p := range v.template {
		signs[p.placeholder] = true
	}
	if c.TimestampField != "" {
		if c.TimestampHeader != "" {
			return nil, fmt.Errorf("hmac.timestamp_field: not with hmac.timestamp_header (one send time)")
		}
		if err := validatePath(c.TimestampField); err != nil {
			return nil, fmt.Errorf("hmac.timestamp_field: %w", err)
		}
		if signs["timestamp"] {
			return nil, fmt.Errorf("hmac.template: {timestamp} needs hmac.timestamp_header (a timestamp_field is signed with the body)")
		}
		v.timestampField = c.TimestampField
	} else if c.TimestampHeader != "" {
		if !validHeaderName(c.TimestampHeader) {
			return nil, fmt.Errorf("hmac.timestamp_header: %q is not a valid header name", c.TimestampHeader)
		}
		if !signs["timestamp"] {
			return nil, fmt.Errorf("hmac.template: must sign {timestamp} when hmac.timestamp_header is set (e.g. \"{timestamp}.{body}\"); an unsigned timestamp stops no replay")
		}
		v.timestampHeader = textproto.CanonicalMIMEHeaderKey(c.TimestampHeader)
	} else if signs["timestamp"] {
		return nil, fmt.Errorf("hmac.template: {timestamp} needs hmac.timestamp_header")
	} else if c.TimestampFormat != "" {
		return nil, fmt.Errorf("hmac.timestamp_format: needs hmac.timestamp_header or hmac.timestamp_field")
	}
	if signs["id"] {
		if cfg.EventID.Header == "" {
			return nil, fmt.Errorf("hmac.template: {id} needs event_id.header")
		}
		v.idHeader = textproto.CanonicalMIMEHeaderKey(cfg.EventID.Header)
		if !v.idUUID {
			// A UUID's extent is its fixed length; a free-form id's is
			// the text beside it, which it must then not contain.
			v.idBounds = idBounds(v.template)
		}
	} else if v.idUUID {
		return nil, fmt.Errorf("hmac.id_format: applies to a signed {id} only (the template has none)")
	} else if cfg.EventID.Header != "" && !c.AllowUnsignedID {
		return nil, fmt.Errorf("event_id.header: %s is not signed (the template has no {id}): a captured delivery replayed under a new id would be a new event; "+
			"sign it with {id}, use event_id.field, or accept the risk with hmac.allow_unsigned_id: true", cfg.EventID.Header)
	}
	if v.identity, err = newIdentity(cfg, identityFields{}); err != nil {
		return nil, err
	}
	return v, nil
}

// parseTemplate splits a template into literals and placeholders. It
// requires {body} exactly once and rejects unknown {names}, so a typo such
// as "{timestmp}" fails at startup instead of never matching. Placeholders
// side by side are checkAdjacency's to judge.
func parseTemplate(t string) ([]templatePart, error) {
	if t == "" {
		t = "{body}"
	}
	var parts []templatePart
	var lit strings.Builder
	bodies := 0
	for i := 0; i < len(t); {
		if t[i] == '{' {
			if end := strings.IndexByte(t[i:], '}'); end > 0 {
				name := t[i+1 : i+end]
				switch name {
				case "body", "timestamp", "id":
					if lit.Len() > 0 {
						parts = append(parts, templatePart{literal: lit.String()})
						lit.Reset()
					}
					parts = append(parts, templatePart{placeholder: name})
					if name == "body" {
						bodies++
					}
					i += end + 1
					continue
				default:
					if isPlaceholderName(name) {
						return nil, fmt.Errorf("unknown placeholder {%s} (known: {body}, {timestamp}, {id}, {url}, {method})", name)
					}
				}
			}
		}
		lit.WriteByte(t[i])
		i++
	}
	if lit.Len() > 0 {
		parts = append(parts, templatePart{literal: lit.String()})
	}
	if bodies != 1 {
		return nil, fmt.Errorf("must contain {body} exactly once")
	}
	return parts, nil
}

// idBounds returns the literal bytes next to each {id} in parts.
func idBounds(parts []templatePart) string {
	var b []byte
	for i, p := range parts {
		if p.placeholder != "id" {
			continue
		}
		if i > 0 && parts[i-1].literal != "" {
			l := parts[i-1].literal
			b = append(b, l[len(l)-1])
		}
		if i+1 < len(parts) && parts[i+1].literal != "" {
			b = append(b, parts[i+1].literal[0])
		}
	}
	return string(b)
}

func isPlaceholderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func (v *hmacVerifier) Verify(d *Request) (Identity, error) {
	sig := d.Header.Get(v.header)
	if sig == "" {
		return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, v.header)
	}
	var ts, id string
	if v.timestampHeader != "" {
		if ts = d.Header.Get(v.timestampHeader); ts == "" {
			return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, v.timestampHeader)
		}
		// Checked before any MAC work: cheap, and stale replays stop here.
		if err := v.checkTimestamp(ts, d.now()); err != nil {
			return Identity{}, fmt.Errorf("%w (%s)", err, v.timestampHeader)
		}
	}
	if v.idHeader != "" {
		if id = d.Header.Get(v.idHeader); id == "" {
			return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, v.idHeader)
		}
		if v.idUUID && !isUUID(id) {
			return Identity{}, fmt.Errorf("%w: %s is not a UUID (hmac.id_format)", ErrMalformed, v.idHeader)
		}
	}
	want, err := v.decode(sig)
	if err != nil {
		return Identity{}, err
	}
	content := make([][]byte, len(v.template))
	for i, p := range v.template {
		switch p.placeholder {
		case "body":
			content[i] = d.Body
		case "timestamp":
			content[i] = []byte(ts)
		case "id":
			content[i] = []byte(id)
		default:
			content[i] = []byte(p.literal)
		}
	}
	idx := firstMatch(v.keys, want, content...)
	if idx < 0 {
		return Identity{}, fmt.Errorf("%w: %s does not match", ErrBadSignature, v.header)
	}

	if v.idBounds != "" && containsAnyByte(id, v.idBounds) {
		return Identity{}, fmt.Errorf("%w: %s contains a character that separates it from the rest of hmac.template", ErrMalformed, v.idHeader)
	}

	// Verified: only now is the body parsed.
	ev := Identity{SecretIndex: idx}
	body := jsonBody{raw: d.Body}
	if v.timestampField != "" {
		if err := v.checkBodyTimestamp(&body, d.now()); err != nil {
			return Identity{}, fmt.Errorf("%w (body field %s)", err, v.timestampField)
		}
	}
	if err := v.identity.read(d.Header, &body, &ev); err != nil {
		return Identity{}, err
	}
	return ev, nil
}

// checkTimestamp parses ts in the configured format and checks the window.
// Unix seconds take the historical path (leading zeros allowed unless the
// timestamp has a placeholder beside it).
func (v *hmacVerifier) checkTimestamp(ts string, now time.Time) error {
	if v.tsFormat == formatUnix && !v.tsCanonical {
		sec, err := parseUnixSeconds(ts)
		if err == nil {
			err = checkWithin(sec, now, v.tolerance)
		}
		return err
	}
	t, err := v.tsFormat.parse(ts, v.tsCanonical)
	if err != nil {
		return err
	}
	return windowBoth.check(t, now, v.tolerance)
}

// checkBodyTimestamp reads hmac.timestamp_field from the verified body and
// checks the window. A unix time must be a JSON number of digits (what
// @linear/sdk requires: a number), an RFC 3339 time a string; a body that
// is not JSON is malformed, as for any configured field.
func (v *hmacVerifier) checkBodyTimestamp(body *jsonBody, now time.Time) error {
	r, err := body.result(v.timestampField)
	if err != nil {
		return err
	}
	var ts string
	switch {
	case !r.Exists():
		return fmt.Errorf("%w: absent", ErrTimestamp)
	case v.tsFormat == formatRFC3339 && r.Type == gjson.String:
		ts = r.Str
	case v.tsFormat != formatRFC3339 && r.Type == gjson.Number:
		ts = r.Raw
	default:
		return fmt.Errorf("%w: not %s", ErrTimestamp, v.tsFormat)
	}
	t, err := v.tsFormat.parse(ts, false)
	if err != nil {
		return err
	}
	return windowBoth.check(t, now, v.tolerance)
}

// decode strips the prefix and decodes the MAC. Any failure is a bad
// signature, not a malformed delivery: nothing is verified yet.
func (v *hmacVerifier) decode(sig string) ([]byte, error) {
	rest, ok := strings.CutPrefix(sig, v.prefix)
	if !ok {
		return nil, fmt.Errorf("%w: %s lacks the configured prefix", ErrBadSignature, v.header)
	}
	// Room for the MAC plus base64's partial trailing byte. Senders differ
	// on base64 alphabet and padding; all spell the same MAC, and the MAC
	// comparison, not the encoding, is what authenticates.
	out := make([]byte, v.size+2)
	if !decodeMAC(out, rest, v.size, v.base64) {
		return nil, fmt.Errorf("%w: %s is not %d bytes of valid %s", ErrBadSignature, v.header, v.size, v.encoding())
	}
	return out[:v.size], nil
}

func (v *hmacVerifier) encoding() string {
	if v.base64 {
		return "base64"
	}
	return "hex"
}
