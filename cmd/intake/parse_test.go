package main

import (
	"os"
	"strings"
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

// TestSelfFitsHowItWasStarted (issue 34 item 8): dev's banner and send's
// "again" hint start with the command that started this one — the binary
// as it was named, or `go run ./cmd/intake` for a go-run build — and carry
// --config when one was given. Not parallel: it sets os.Args[0].
func TestSelfFitsHowItWasStarted(t *testing.T) {
	argv0 := os.Args[0]
	t.Cleanup(func() { os.Args[0] = argv0 })
	for _, c := range []struct {
		argv0, config string
		want          string
	}{
		{"intake", "", "intake"},
		{"./bin/intake", "my config.yaml", "./bin/intake --config 'my config.yaml'"},
		{"/tmp/go-build123/b001/exe/intake", "", "go run ./cmd/intake"},
		{"/tmp/go-build123/b001/exe/intake", "intake.yaml", "go run ./cmd/intake --config intake.yaml"},
	} {
		os.Args[0] = c.argv0
		g := &globals{configPath: c.config}
		if got := g.self(true); got != c.want {
			t.Errorf("started as %q with --config %q: self = %q, want %q", c.argv0, c.config, got, c.want)
		}
		if got, want := g.self(false), strings.Split(c.want, " --config")[0]; got != want {
			t.Errorf("started as %q: self without config = %q, want %q", c.argv0, got, want)
		}
	}
}
