package ingress

import "bytes"

// jsonDepthExceeds reports whether b nests JSON arrays and objects deeper
// than max. It is a byte scan — no allocation, no recursion — that skips
// strings (with their escapes), so it runs before anything parses the body:
// a recursive parser given a deep enough body spends memory per level and
// finally overflows the stack. Bytes that are not JSON are scanned the
// same way; only brackets outside strings count.
//
// A body is mostly string bytes, so from a plain byte inside a string it
// jumps to the next backslash or quote with bytes.IndexByte, many bytes at
// a time. Escapes are read byte by byte, and the next quote, once found,
// is kept until passed: a string of escapes is still one pass. A jump
// shorter than shortJump is followed by as many of the string's bytes
// read one by one, so a string built to make it jump every few bytes costs
// about 1.5 times the plain scan (BenchmarkJSONDepth), not a call per
// escape; a 16 KiB body of long strings, a thirtieth.
func jsonDepthExceeds(b []byte, max int) bool {
	depth := 0
	inString := false
	quote := -1 // the index of the next '"' while in a string, once found
	plain := 0  // string bytes to read one by one before the next jump
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch {
			case c == '\\':
				i++ // the escaped byte, whatever it is
				continue
			case c == '"':
				inString = false
				continue
			case plain > 0:
				plain--
				continue
			}
			// Jump to just before the next backslash, or the closing
			// quote, which the byte cases above then read.
			from := i
			if quote < i {
				q := bytes.IndexByte(b[i:], '"')
				if q < 0 {
					return false // the string never ends: no bracket counts after it
				}
				quote = i + q
			}
			if e := bytes.IndexByte(b[i:quote], '\\'); e >= 0 {
				i += e - 1
			} else {
				i = quote - 1
			}
			if i-from < shortJump {
				plain = shortJump // escapes close together: read on byte by byte for a while
			}
			continue
		}
		switch c {
		case '"':
			inString, plain = true, 0
		case '[', '{':
			depth++
			if depth > max {
				return true
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}

// shortJump is a jump too short to be worth its call (a few nanoseconds).
const shortJump = 16
