package config

import (
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/provider"
)

func TestRetentionDefaultsAndFloors(t *testing.T) {
	got := Retention{}.WithDefaults()
	want := Retention{Inbox: 90 * 24 * time.Hour, History: 90 * 24 * time.Hour, Evidence: 365 * 24 * time.Hour,
		Interval: 10 * time.Minute, BatchSize: 500}
	if got != want {
		t.Errorf("Retention{}.WithDefaults() = %+v, want %+v", got, want)
	}
	// Evidence never defaults below the inbox it must outlive.
	if got := (Retention{Inbox: 400 * 24 * time.Hour}).WithDefaults(); got.Evidence != got.Inbox || got.History != got.Inbox {
		t.Errorf("a long inbox: %+v", got)
	}

	day := 24 * time.Hour
	for _, tc := range []struct {
		name   string
		r      Retention
		maxAge time.Duration
		ins    []Integration
		want   []string // substrings of the error, one per problem
	}{
		{"defaults", Retention{}, 30 * day, nil, nil},
		{"shorter than the stream", Retention{Inbox: 7 * day}, 30 * day, nil,
			[]string{"retention.inbox: must be at least nats.stream.max_age (720h0m0s) plus 1h0m0s"}},
		{"shorter than the provider retries", Retention{Inbox: 2 * day}, day,
			[]Integration{{Name: "pay", Config: provider.Config{Provider: "stripe"}}},
			[]string{"retention.inbox: must be at least 72h0m0s for integration pay: Stripe retries for up to 3 days"}},
		{"an integration's own floor", Retention{Inbox: 2 * day}, day,
			[]Integration{{Name: "gh", InboxRetention: 36 * time.Hour, Config: provider.Config{Provider: "github"}}},
			[]string{"integrations[0] (gh).inbox_retention: must be at least 72h0m0s"}},
		{"an integration may keep longer", Retention{}, 30 * day,
			[]Integration{{Name: "gh", InboxRetention: 300 * day, Config: provider.Config{Provider: "github"}}}, nil},
		{"but not past the evidence", Retention{}, 30 * day,
			[]Integration{{Name: "gh", InboxRetention: 400 * day, Config: provider.Config{Provider: "github"}}},
			[]string{"integrations[0] (gh).inbox_retention: must be at most retention.evidence"}},
		{"the stream's age is not enough", Retention{Inbox: 30 * day}, 30 * day, nil,
			[]string{"retention.inbox: must be at least nats.stream.max_age (720h0m0s) plus 1h0m0s"}},
		{"a provider with no documented window", Retention{Inbox: day}, 23 * time.Hour,
			[]Integration{{Name: "h", Config: provider.Config{Provider: "hmac"}}}, nil},
		{"history past the inbox", Retention{History: 100 * day}, 30 * day, nil,
			[]string{"retention.history: must be positive and at most retention.inbox"}},
		{"evidence shorter than the inbox", Retention{Evidence: 30 * day}, 30 * day, nil,
			[]string{"retention.evidence: must be at least retention.inbox"}},
		{"a batch past the lock budget", Retention{BatchSize: 5000}, 30 * day, nil,
			[]string{"retention.batch_size: must be between 1 and 2000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.WithDefaults().Validate(tc.maxAge, tc.ins)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// A whole config names the field: the stream keeps 60 days, the inbox 30.
func TestRetentionRefusedInAConfig(t *testing.T) {
	c := Config{NATS: NATS{Stream: Stream{MaxAge: 60 * 24 * time.Hour}}, Retention: Retention{Inbox: 30 * 24 * time.Hour}}.WithDefaults()
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "retention.inbox: must be at least nats.stream.max_age (1440h0m0s) plus 1h0m0s") {
		t.Fatalf("Validate() = %v", err)
	}
}
