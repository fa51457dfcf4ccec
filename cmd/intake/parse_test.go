package main

import (
	"testing"
	"time"
)

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"", time.Time{}, true},
		{"2h", now.Add(-2 * time.Hour), true},
		{"90m", now.Add(-90 * time.Minute), true},
		{"2026-04-30T10:00:00Z", time.Date(2026, 4, 30, 10, 0, 0, 0, time.UTC), true},
		{"2d", now.Add(-48 * time.Hour), true},
		{"0d", now, true},
		{"-2h", time.Time{}, false},
		{"-2d", time.Time{}, false},
		{"1.5d", time.Time{}, false},
		{"d", time.Time{}, false},
		{"99999999d", time.Time{}, false},
		{"yesterday", time.Time{}, false},
	}
	for _, tt := range tests {
		got, err := parseWhen("since", tt.in, now)
		if (err == nil) != tt.ok {
			t.Errorf("parseWhen(%q) error %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if tt.ok && tt.in == "" && got != nil {
			t.Errorf("parseWhen(\"\") = %v, want nil", got)
		}
		if tt.ok && tt.in != "" && !got.Equal(tt.want) {
			t.Errorf("parseWhen(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"demo/main/evt_1": "demo/main/evt_1",
		"a b":             "'a b'",
		"it's":            `'it'\''s'`,
		"":                "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestShortKeepsCharactersWhole(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{{"abcdef", 3, "abc"}, {"abc", 5, "abc"}, {"aé", 2, "a"}, {"ééé", 3, "é"}, {"日本", 4, "日"}} {
		if got := short(c.in, c.n); got != c.want {
			t.Errorf("short(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
