package store

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// Outbox headers are stored as jsonb ({"Name": ["value", …]}) so operators
// and the replayer can query them. Encoding and decoding them with
// encoding/json's reflection was a fifth of the processor's CPU in `intake
// bench` profiles; these two functions do the one shape by hand.

// appendHeadersJSON appends h as a JSON object of string arrays.
func appendHeadersJSON(dst []byte, h map[string][]string) []byte {
	dst = append(dst, '{')
	first := true
	for k, vs := range h {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, k)
		dst = append(dst, ':', '[')
		for i, v := range vs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, v)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD
// (jsonb refuses it anyway).
func appendJSONString(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// parseHeadersJSON reads what appendHeadersJSON wrote (as jsonb renders it).
func parseHeadersJSON(raw []byte) (map[string][]string, error) {
	if !gjson.ValidBytes(raw) {
		return nil, fmt.Errorf("store: outbox headers are not JSON")
	}
	root := gjson.ParseBytes(raw)
	if !root.IsObject() {
		return nil, fmt.Errorf("store: outbox headers are not a JSON object")
	}
	h := make(map[string][]string, 12)
	var err error
	root.ForEach(func(k, v gjson.Result) bool {
		if !v.IsArray() {
			err = fmt.Errorf("store: outbox header %s is not an array", strconv.Quote(k.String()))
			return false
		}
		vals := make([]string, 0, 1)
		v.ForEach(func(_, s gjson.Result) bool {
			vals = append(vals, s.String())
			return true
		})
		h[k.String()] = vals
		return true
	})
	return h, err
}
