package cut

import (
	"testing"
	"unicode/utf8"
)

func TestUTF8(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abc", 5, "abc"},
		{"abcd", 3, "abc"},
		{"aé", 2, "a"},   // é is 2 bytes: not split
		{"aéb", 3, "aé"}, // ends on its last byte
		{"€uro", 2, ""},  // € is 3 bytes
		{"abc", 0, ""},
		{"abc", -1, ""},
		{"ééé", 3, "é"},
		{"日本", 4, "日"},
	} {
		got := UTF8(c.s, c.n)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("UTF8(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func FuzzUTF8(f *testing.F) {
	f.Add("aé€b", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := UTF8(s, n)
		if len(got) > max(n, 0) && got != s {
			t.Fatalf("UTF8(%q, %d) = %q: longer than %d", s, n, got, n)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("UTF8(%q, %d) = %q: a character split", s, n, got)
		}
	})
}
