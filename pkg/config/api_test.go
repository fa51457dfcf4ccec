package config

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"regexp"
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

// TestAPIReplayerBounds: api.replays, api.reconcile and the replayer's
// intervals parse, default to the documented values and are refused
// naming their field.
func TestAPIReplayerBounds(t *testing.T) {
	cfg, err := Parse([]byte("api: {}"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.API.Replays, (APIReplays{DefaultRate: 100, MaxRate: 10_000, MaxMatched: 1_000_000, ReexecuteApprovalAbove: 1000, MaxRunning: 2,
		ResumeInterval: 10 * time.Second, PublishTimeout: 10 * time.Second, RetryFor: 2 * time.Minute}); got != want {
		t.Errorf("api.replays defaults %+v, want %+v", got, want)
	}
	if got, want := cfg.API.Reconcile, (APIReconcile{MaxSpan: 100_000, ViewerMaxSpan: 10_000, MaxRunning: 2}); got != want {
		t.Errorf("api.reconcile defaults %+v, want %+v", got, want)
	}
	if cfg.API.StatsInterval != 30*time.Second || cfg.API.GapCheckInterval != 5*time.Minute {
		t.Errorf("api.stats_interval %s, api.gap_check_interval %s; want 30s, 5m", cfg.API.StatsInterval, cfg.API.GapCheckInterval)
	}
	// A viewer's span follows a lower max_span.
	if got := (APIReconcile{MaxSpan: 500}).WithDefaults().ViewerMaxSpan; got != 500 {
		t.Errorf("viewer_max_span under max_span 500 = %d, want 500", got)
	}

	cfg, err = Parse([]byte(`api:
  stats_interval: 1m
  gap_check_interval: 10m
  replays: {default_rate: 20, max_rate: 40, max_matched: 1000, reexecute_approval_above: -1, max_running: 1, resume_interval: 1s, publish_timeout: 3s, retry_for: 30s}
  reconcile: {max_span: 300, viewer_max_span: 30, max_running: 5}`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.API.Replays, (APIReplays{DefaultRate: 20, MaxRate: 40, MaxMatched: 1000, ReexecuteApprovalAbove: -1, MaxRunning: 1,
		ResumeInterval: time.Second, PublishTimeout: 3 * time.Second, RetryFor: 30 * time.Second}); got != want {
		t.Errorf("api.replays %+v, want %+v", got, want)
	}
	if got, want := cfg.API.Reconcile, (APIReconcile{MaxSpan: 300, ViewerMaxSpan: 30, MaxRunning: 5}); got != want {
		t.Errorf("api.reconcile %+v, want %+v", got, want)
	}
	if cfg.API.StatsInterval != time.Minute || cfg.API.GapCheckInterval != 10*time.Minute {
		t.Errorf("api.stats_interval %s, api.gap_check_interval %s; want 1m, 10m", cfg.API.StatsInterval, cfg.API.GapCheckInterval)
	}

	for _, tt := range []struct{ yaml, want string }{
		{"{replays: {default_rate: 200, max_rate: 100}}", "api.replays.default_rate: must be 1..api.replays.max_rate (100), got 200"},
		{"{replays: {max_rate: -1}}", "api.replays.max_rate: must be at least 1, got -1"},
		{"{replays: {max_matched: -1}}", "api.replays.max_matched: must be at least 1"},
		{"{replays: {max_running: -2}}", "api.replays.max_running: must be at least 1"},
		{"{replays: {reexecute_approval_above: -2}}", "api.replays.reexecute_approval_above: must be a count of events, or -1"},
		{"{replays: {resume_interval: -1s}}", "api.replays.resume_interval: must be positive"},
		{"{replays: {publish_timeout: -1s}}", "api.replays.publish_timeout: must be positive"},
		{"{replays: {retry_for: -1s}}", "api.replays.retry_for: must be positive"},
		{"{reconcile: {max_span: 100, viewer_max_span: 1000}}", "api.reconcile.viewer_max_span: must be 1..api.reconcile.max_span (100), got 1000"},
		{"{reconcile: {max_span: -1}}", "api.reconcile.max_span: must be at least 1"},
		{"{reconcile: {max_running: -1}}", "api.reconcile.max_running: must be at least 1"},
		{"{stats_interval: -1s}", "api.stats_interval: must be positive"},
		{"{gap_check_interval: -1m}", "api.gap_check_interval: must be positive"},
		{"{replays: {max_rates: 5}}", "field max_rates not found"},
	} {
		if _, err := Parse([]byte("api: "+tt.yaml), env(nil)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error = %v, want %q", tt.yaml, err, tt.want)
		}
	}
}

// TestExampleShowsTheAPIDefaults: the api keys example.yaml shows commented
// out are the defaults, so uncommenting them changes nothing.
func TestExampleShowsTheAPIDefaults(t *testing.T) {
	commented := regexp.MustCompile(`(?m)^  # ((?:  )?[a-z_]+:)`)
	if n := len(commented.FindAll(Example, -1)); n != 17 {
		t.Fatalf("example.yaml shows %d commented api keys, want 17", n)
	}
	uncommented, err := Parse(commented.ReplaceAll(Example, []byte("  $1")), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := (API{Tokens: uncommented.API.Tokens}).WithDefaults(); !reflect.DeepEqual(uncommented.API, want) {
		t.Errorf("example.yaml's api keys, uncommented: %+v; want the defaults %+v", uncommented.API, want)
	}
}
