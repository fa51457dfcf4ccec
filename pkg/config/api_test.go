package config

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

func TestAPITokens(t *testing.T) {
	const tok = "an-operator-token-0123"
	sum := sha256.Sum256([]byte(tok))
	hexSum := hex.EncodeToString(sum[:])
	tests := []struct {
		name, yaml, want string
	}{
		{"token", "{name: a, token: " + tok + ", role: operator}", ""},
		{"hash", "{name: a, token_sha256: " + hexSum + ", role: viewer}", ""},
		{"hash upper case", "{name: a, token_sha256: " + strings.ToUpper(hexSum) + ", role: viewer}", ""},
		{"both", "{name: a, token: " + tok + ", token_sha256: " + hexSum + ", role: viewer}", "api.tokens[0]: give token or token_sha256, not both"},
		{"neither", "{name: a, role: viewer}", "api.tokens[0].token: must be at least 16 characters"},
		{"short hash", "{name: a, token_sha256: abcd, role: viewer}", "api.tokens[0].token_sha256: must be 64 hex digits"},
		{"not hex", "{name: a, token_sha256: " + strings.Repeat("zz", 32) + ", role: viewer}", "api.tokens[0].token_sha256: must be 64 hex digits"},
		{"bad role", "{name: a, token_sha256: " + hexSum + ", role: admin}", "api.tokens[0].role"},
		{"token and its hash", "{name: a, token: " + tok + ", role: viewer}, {name: b, token_sha256: " + hexSum + ", role: operator}", "api.tokens[1]: duplicates another token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte("api: {tokens: ["+tt.yaml+"]}"), env(nil))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := cfg.API.Tokens[0].Sum(); got != sum {
					t.Fatalf("Sum = %x, want %x", got, sum)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestAPIRedrive(t *testing.T) {
	tests := []struct {
		name, yaml   string
		interval, lb time.Duration
		want         string
	}{
		{"defaults", "{}", DefaultRedriveInterval, DefaultRedriveLookback, ""},
		{"set", "{redrive_interval: 30s, redrive_lookback: 1h}", 30 * time.Second, time.Hour, ""},
		{"off", "{redrive_interval: -1s}", -time.Second, DefaultRedriveLookback, ""},
		{"negative lookback", "{redrive_lookback: -1m}", 0, 0, "api.redrive_lookback: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte("api: "+tt.yaml), env(nil))
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error = %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.API.RedriveInterval != tt.interval || cfg.API.RedriveLookback != tt.lb {
				t.Fatalf("redrive = %s / %s, want %s / %s", cfg.API.RedriveInterval, cfg.API.RedriveLookback, tt.interval, tt.lb)
			}
		})
	}
}
