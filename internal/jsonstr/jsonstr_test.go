package jsonstr

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// Whatever the input, the output is one JSON string that encoding/json
// reads back as the input (with invalid UTF-8 replaced).
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "plain", `quo"te`, `back\slash`, "ctl\x00\x1f\n\r\t", "ünï€😀", "bad\xffutf8", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Append([]byte("prefix"), s)
		if !strings.HasPrefix(string(out), "prefix") {
			t.Fatalf("prefix lost: %q", out)
		}
		var got string
		if err := json.Unmarshal(out[len("prefix"):], &got); err != nil {
			t.Fatalf("Append(%q) = %s: not JSON: %v", s, out, err)
		}
		want := s
		if !utf8.ValidString(want) {
			want = strings.ToValidUTF8(want, "\uFFFD")
		}
		if got != want {
			t.Fatalf("Append(%q) reads back as %q", s, got)
		}
	})
}
