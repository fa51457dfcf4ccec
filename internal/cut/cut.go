// Package cut shortens text for tables, pages and log rows without
// splitting a UTF-8 character.
package cut

import "unicode/utf8"

// UTF8 returns s cut to at most n bytes, at a character's start: s itself
// when it is no longer.
func UTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)]
}
