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
	"fmt"
	"net/http"
	"net/textproto"

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

// read returns the header's value when present and non-empty, else the body
// field's value; "" when neither yields one. It fails only when the body must
// be read and is not valid JSON.
func (s source) read(h http.Header, body *jsonBody) (string, error) {
	if s.header != "" {
		if v := h.Get(s.header); v != "" {
			return v, nil
		}
	}
	if s.path == "" {
		return "", nil
	}
	if s.lenient && !body.checked {
		// A best-effort value (the standard event type) does not pay for
		// validating the whole body: on a 16 KiB body that was an eighth of
		// ingress CPU. gjson reads malformed input without panicking; what it
		// returns then is only a label, cleaned before use.
		return value(gjson.GetBytes(body.raw, s.path)), nil
	}
	v, err := body.field(s.path)
	if err != nil && s.lenient {
		return "", nil
	}
	return v, err
}

// jsonBody validates a delivery body at most once, however many fields are
// read from it, and only if one is.
type jsonBody struct {
	raw     []byte
	checked bool
	err     error
}

// field returns the string or number at path ("" for anything else or when
// absent), or an error wrapping ErrMalformed when the body is not valid JSON.
func (b *jsonBody) field(path string) (string, error) {
	if !b.checked {
		b.checked = true
		if !gjson.ValidBytes(b.raw) {
			b.err = fmt.Errorf("%w: body is not valid JSON", ErrMalformed)
		}
	}
	if b.err != nil {
		return "", b.err
	}
	return value(gjson.GetBytes(b.raw, path)), nil
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
