package provider

// Identity values (event id, event type) come from a request header or from a
// JSON field of the body, as a Field configures. Paths are gjson paths limited
// to plain keys joined by dots ("data.object.id"; a numeric key also indexes an
// array): gjson's wildcards, queries, modifiers and multipaths are rejected at
// construction, because a pattern that picks "whichever key matches first"
// would make the dedup id depend on payload layout. A key containing one of
// the characters . | * ? # @ ! [ { \ is written with gjson's backslash escape,
// e.g. "metadata.order\.id".

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// source is a validated Field, its header name canonicalised once so that
// Verify's lookup does not allocate.
type source struct {
	header string // canonical header name; "" when none
	path   string // gjson path into the body; "" when none
	// lenient reads "" instead of failing when the body is not JSON (see
	// identity.go: provider defaults are lenient, configured fields strict).
	lenient bool
}

// newSource validates f; name is the config key used in error messages.
func newSource(name string, f Field) (source, error) {
	var s source
	if f.Header != "" {
		if !validHeaderName(f.Header) {
			return source{}, fmt.Errorf("%s.header: %q is not a valid header name", name, f.Header)
		}
		s.header = textproto.CanonicalMIMEHeaderKey(f.Header)
	}
	if f.Field != "" {
		if err := validatePath(f.Field); err != nil {
			return source{}, fmt.Errorf("%s.field: %w", name, err)
		}
		s.path = f.Field
	}
	return s, nil
}

func (s source) isZero() bool { return s.header == "" && s.path == "" }

// String names the source in error messages.
func (s source) String() string {
	switch {
	case s.header != "" && s.path != "":
		return "header " + s.header + " or field " + s.path
	case s.header != "":
		return "header " + s.header
	case s.path != "":
		return "field " + s.path
	default:
		return "no configured source"
	}
}

// read returns the body field's value when it yields one, else the
// header's: the body is covered by every provider's signature, a header
// mostly is not, so a header must not override a signed field. "" when
// neither yields one. It fails when the body must be read and is not valid
// JSON (unless a configured header serves instead), or when the field's key
// appears twice on its path (readers disagree on which copy counts).
func (s source) read(h http.Header, body *jsonBody) (string, error) {
	if s.path != "" {
		v, err := s.readField(body)
		switch {
		case err != nil && errors.Is(err, errNotJSON) && s.header != "":
			// Not JSON (a form-encoded GitHub delivery): the header serves.
		case err != nil:
			return "", err
		case v != "":
			return v, nil
		}
	}
	if s.header != "" {
		return h.Get(s.header), nil
	}
	return "", nil
}

func (s source) readField(body *jsonBody) (string, error) {
	if s.lenient && !body.checked {
		// A best-effort value (the standard event type) does not pay for
		// validating the whole body: on a 16 KiB body that was an eighth of
		// ingress CPU. gjson reads malformed input without panicking; what it
		// returns then is only a label, cleaned before use. A duplicated key
		// is refused all the same.
		return lookup(body.raw, s.path)
	}
	v, err := body.field(s.path)
	if err != nil && s.lenient && errors.Is(err, errNotJSON) {
		return "", nil
	}
	return v, err
}

// errNotJSON: the body is not valid JSON. It wraps ErrMalformed.
var errNotJSON = fmt.Errorf("%w: body is not valid JSON", ErrMalformed)

// errDuplicateKey: a key on a field's path appears twice in one object
// (also in another letter case: encoding/json matches struct fields
// case-insensitively). gjson reads the first copy, encoding/json the last,
// so a subscriber could see another id or type than the one Intake
// deduplicated and routed by. It wraps ErrMalformed.
var errDuplicateKey = fmt.Errorf("%w: a key on the field's path appears twice", ErrMalformed)

// jsonBody validates a delivery body at most once, however many fields are
// read from it, and only if one is.
type jsonBody struct {
	raw     []byte
	checked bool
	err     error
}

// field returns the string or number at path ("" for anything else or when
// absent), or an error wrapping ErrMalformed when the body is not valid JSON
// or a key on the path is duplicated.
func (b *jsonBody) field(path string) (string, error) {
	if err := b.valid(); err != nil {
		return "", err
	}
	return lookup(b.raw, path)
}

// valid validates the body once: errNotJSON when it is not JSON.
func (b *jsonBody) valid() error {
	if !b.checked {
		b.checked = true
		if !gjson.ValidBytes(b.raw) {
			b.err = errNotJSON
		}
	}
	return b.err
}

// result returns what is at path, whatever its kind (one that does not
// Exist when nothing is), with field's checks: valid JSON, no duplicated
// key on the path. Its strings point into the body (walk).
func (b *jsonBody) result(path string) (gjson.Result, error) {
	if err := b.valid(); err != nil {
		return gjson.Result{}, err
	}
	return walk(b.raw, path)
}

// isObject reports whether the body is a valid JSON object.
func (b *jsonBody) isObject() bool {
	return b.valid() == nil && gjson.Parse(view(b.raw)).IsObject()
}

// view is raw as a string without copying it: gjson.ParseBytes copies the
// whole body to read one field (16 KiB for a 16 KiB delivery's event
// type). gjson only reads it, and what walks over it return points into
// raw, so they are used while raw is unchanged and lookup copies the one
// value it returns.
func view(raw []byte) string {
	return unsafe.String(unsafe.SliceData(raw), len(raw))
}

// lookup walks path through raw, one key at a time as gjson does (the first
// exact match; a numeric key also indexes an array), and fails when a key
// on the way appears more than once in its object, in any letter case.
func lookup(raw []byte, path string) (string, error) {
	cur, err := walk(raw, path)
	if err != nil || !cur.Exists() {
		return "", err
	}
	v := value(cur)
	if !utf8.ValidString(v) {
		// gjson hands the bytes back as they are, encoding/json
		// replaces them: refuse rather than read one value two ways.
		return "", fmt.Errorf("%w: the value at %q is not valid UTF-8", ErrMalformed, path)
	}
	return strings.Clone(v), nil // v may point into raw (view)
}

// walk returns what lookup finds at path, whatever its kind; a result that
// does not Exist when the path leads nowhere. Its strings point into raw
// (view): copy what is kept.
func walk(raw []byte, path string) (gjson.Result, error) {
	cur := gjson.Parse(view(raw))
	for rest := path; ; {
		var key string
		key, rest = nextKey(rest)
		switch {
		case cur.IsObject():
			var found gjson.Result
			n, exact := 0, false
			cur.ForEach(func(k, v gjson.Result) bool {
				if strings.EqualFold(k.Str, key) {
					n++
					if !exact && k.Str == key {
						found, exact = v, true
					}
				}
				return n < 2
			})
			if n > 1 {
				return gjson.Result{}, fmt.Errorf("%w (%q)", errDuplicateKey, key)
			}
			cur = found
		case cur.IsArray():
			cur = cur.Get(gjsonEscape(key))
		default:
			return gjson.Result{}, nil
		}
		if !cur.Exists() || rest == "" {
			return cur, nil
		}
	}
}

// nextKey splits the first key off a validated path, unescaping it.
func nextKey(path string) (key, rest string) {
	if i := strings.IndexAny(path, `.\`); i < 0 {
		return path, ""
	} else if path[i] == '.' {
		return path[:i], path[i+1:] // no escape: no copy
	}
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		switch c := path[i]; c {
		case '\\':
			i++
			b.WriteByte(path[i])
		case '.':
			return b.String(), path[i+1:]
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), ""
}

// gjsonEscape writes key as one gjson path component.
func gjsonEscape(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		if strings.IndexByte(`.|*?#@![{\\`, key[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	return b.String()
}

// value is a field's identity text: strings as they are, numbers as their
// raw text (not float64: a 19-digit id must not round), "" for anything
// else — objects, arrays, null and booleans are no identity ("true" as an
// event id would fold every delivery into one key).
func value(r gjson.Result) string {
	switch r.Type {
	case gjson.String:
		return r.Str
	case gjson.Number:
		return r.Raw
	default:
		return ""
	}
}

// jsonField reads one value at path from body; see jsonBody.field.
func jsonField(body []byte, path string) (string, error) {
	b := jsonBody{raw: body}
	return b.field(path)
}

// validatePath accepts dotted plain keys with gjson backslash escapes and
// rejects the rest of gjson's path language (see the file comment).
func validatePath(path string) error {
	if path == "" {
		return fmt.Errorf("empty path")
	}
	segLen := 0
	for i := 0; i < len(path); i++ {
		switch c := path[i]; c {
		case '\\':
			i++
			if i == len(path) {
				return fmt.Errorf("path %q ends in a dangling escape", path)
			}
			segLen++
		case '.':
			if segLen == 0 {
				return fmt.Errorf("path %q has an empty key", path)
			}
			segLen = 0
		case '|', '*', '?', '#', '@', '!', '[', '{':
			return fmt.Errorf("path %q: %q has a special meaning in gjson paths; escape it with \\ if it is part of a key", path, c)
		default:
			segLen++
		}
	}
	if segLen == 0 {
		return fmt.Errorf("path %q has an empty key", path)
	}
	return nil
}

// validHeaderName reports whether s is an RFC 9110 token, so that a typo such
// as a trailing colon fails at startup instead of never matching.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
			c == '+' || c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~':
		default:
			return false
		}
	}
	return true
}
