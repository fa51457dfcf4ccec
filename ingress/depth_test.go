package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
		{`{"s":"\\\"[["}[[`, 1, true},          // an escaped backslash, then an escaped quote: still in the string
		{`{"a":"x"}"[[[`, 1, false},            // an unterminated string: nothing after it counts
		{`["a\\","[[[",[[]]]`, 3, false},       // several strings, escapes between them
		{`["a\\","[[[",[[[]]]]`, 3, true},
	} {
		if got := jsonDepthExceeds([]byte(tt.body), tt.max); got != tt.want {
			t.Errorf("jsonDepthExceeds(%.40q, %d) = %v, want %v", tt.body, tt.max, got, tt.want)
		}
	}
}

// byteScanExceeds is jsonDepthExceeds without its jumps: every byte read
// in turn (the scanner as it was before them).
func byteScanExceeds(b []byte, limit int) bool {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > limit {
				return true
			}
		case c == ']' || c == '}':
			depth = max(depth-1, 0)
		}
	}
	return false
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

// FuzzJSONDepth checks the scanner against a byte-by-byte scan on any
// input, and against encoding/json on valid JSON: the limit is exceeded
// exactly when the depth is above it.
func FuzzJSONDepth(f *testing.F) {
	for _, s := range []string{`{}`, `[[1,[2]],{"a":{"b":[]}}]`, `{"s":"[\"{"}`, `"\\"`, `[["\\\\"]]`, `{"a":"\u005b"}`,
		`{"s":"xxxxxxxxxxxxxxxxxxxxxxxx\"yy\\","t":"a\\b\\c\\d[[["}[[`} {
		f.Add([]byte(s), 2)
	}
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		limit = 1 + int(uint(limit)%80)
		got := jsonDepthExceeds(b, limit)
		if want := byteScanExceeds(b, limit); got != want {
			t.Fatalf("jsonDepthExceeds(%q, %d) = %v; the byte-by-byte scan says %v", b, limit, got, want)
		}
		if !json.Valid(b) {
			return // the byte-by-byte scan's answer, whatever it is
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

// BenchmarkJSONDepth: the scan at 1 and 16 KiB of a body shaped like the
// bench's (a long string), of a provider-like one (many short strings), and
// of 1 MiB of escapes inside one string (one pass, not one per escape), and
// of one built to make the scan jump as often as it can.
func BenchmarkJSONDepth(b *testing.B) {
	object := func(n int) []byte {
		var buf bytes.Buffer
		buf.WriteString(`{"id":"evt_1","data":{"object":{`)
		for i := 0; buf.Len() < n-40; i++ {
			fmt.Fprintf(&buf, `"field_%d":"value %d with some text",`, i, i)
		}
		buf.WriteString(`"end":[1,2,{"k":null}]}}}`)
		return buf.Bytes()
	}
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"padded-1KiB", []byte(`{"id":"evt_1","type":"bench.event","pad":"` + strings.Repeat("x", 1000) + `"}`)},
		{"padded-16KiB", []byte(`{"id":"evt_1","type":"bench.event","pad":"` + strings.Repeat("x", 16340) + `"}`)},
		{"fields-1KiB", object(1024)},
		{"fields-16KiB", object(16384)},
		{"escapes-1MiB", []byte(`{"s":"` + strings.Repeat(`\\`, 1<<19) + `"}`)},
		{"escape-then-plain-1MiB", []byte(`{"s":"` + strings.Repeat(`\\x`, 1<<20/3) + `"}`)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				if jsonDepthExceeds(c.body, 64) {
					b.Fatal("exceeds")
				}
			}
		})
	}
}
