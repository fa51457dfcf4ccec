package ingress

// jsonDepthExceeds reports whether b nests JSON arrays and objects deeper
// than max. It is a byte scan — no allocation, no recursion — that skips
// strings (with their escapes), so it runs before anything parses the body:
// a recursive parser given a deep enough body spends memory per level and
// finally overflows the stack. Bytes that are not JSON are scanned the
// same way; only brackets outside strings count.
func jsonDepthExceeds(b []byte, max int) bool {
	depth := 0
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte, whatever it is
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
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
