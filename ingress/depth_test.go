package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestJSONDepthExceeds(t *testing.T) {
	for _, tt := range []struct {
		body string
		max  int
		want bool
	}{
		{``, 1, false},
		{`{}`, 1, false},
		{`{"a":[]}`, 1, true},
		{`{"a":[]}`, 2, false},
		{`[[[]]]`, 2, true},
		{`[[],[],[]]`, 2, false},
		{`{"s":"[[[[[["}`, 1, false},           // brackets in a string
		{`{"s":"\"[[[[["}`, 1, false},          // an escaped quote does not end the string
		{`{"s":"\\"}`, 1, false},               // an escaped backslash does
		{`{"s":"\\",[[]]}`, 2, true},           // …so what follows counts
		{`]]]]]][[`, 2, false},                 // stray closers do not go below zero
		{strings.Repeat("[", 1<<20), 64, true}, // the bomb of issue 14
		{`not json [[[`, 2, true},              // bytes that are not JSON are scanned alike
	} {
		if got := jsonDepthExceeds([]byte(tt.body), tt.max); got != tt.want {
			t.Errorf("jsonDepthExceeds(%.40q, %d) = %v, want %v", tt.body, tt.max, got, tt.want)
		}
	}
}

// referenceDepth is the nesting depth of valid JSON by encoding/json's
// tokenizer.
func referenceDepth(b []byte) (int, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	depth, deepest := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return deepest, true
		}
		if err != nil {
			return 0, false
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

// FuzzJSONDepth checks the scanner against encoding/json on valid JSON:
// the limit is exceeded exactly when the depth is above it.
func FuzzJSONDepth(f *testing.F) {
	for _, s := range []string{`{}`, `[[1,[2]],{"a":{"b":[]}}]`, `{"s":"[\"{"}`, `"\\"`, `[["\\\\"]]`, `{"a":"\u005b"}`} {
		f.Add([]byte(s), 2)
	}
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		limit = 1 + int(uint(limit)%80)
		got := jsonDepthExceeds(b, limit)
		if !json.Valid(b) {
			return // any answer will do; it must not panic
		}
		depth, ok := referenceDepth(b)
		if !ok {
			return
		}
		if want := depth > limit; got != want {
			t.Fatalf("jsonDepthExceeds(%q, %d) = %v; depth is %d", b, limit, got, depth)
		}
	})
}
