// Package jsonstr appends JSON strings without reflection, for the few hot
// paths (outbox headers, ingress answers) where encoding/json showed in the
// profiles.
package jsonstr

import (
	"strings"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// Append appends s as a JSON string. Invalid UTF-8 becomes U+FFFD (jsonb
// refuses it, and encoding/json does the same).
func Append(dst []byte, s string) []byte {
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
