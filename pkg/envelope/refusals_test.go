package envelope_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/intakehq/intake/pkg/envelope"
)

func validSummary() envelope.RefusalSummary {
	at := time.Date(2026, 12, 2, 19, 0, 0, 0, time.UTC)
	return envelope.RefusalSummary{ID: "s-1", Integration: "demo", Instance: "ingress-0", WindowStart: at,
		WindowEnd: at.Add(10 * time.Second), Counts: []envelope.RefusalCount{{StatusCode: 401, Reason: "bad_signature", Count: 3}}}
}

func TestRefusalSummaryRoundTrip(t *testing.T) {
	b, err := envelope.MarshalRefusalSummary(validSummary())
	if err != nil {
		t.Fatal(err)
	}
	s, err := envelope.ParseRefusalSummary(b)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != "s-1" || s.Integration != "demo" || len(s.Counts) != 1 || s.Counts[0] != (envelope.RefusalCount{StatusCode: 401, Reason: "bad_signature", Count: 3}) {
		t.Errorf("round trip = %+v", s)
	}
}

// TestParseRefusalSummaryRefuses: whoever may publish receipts writes a
// summary; what the fold would store wrong, or Postgres refuse, is refused.
func TestParseRefusalSummaryRefuses(t *testing.T) {
	for name, mutate := range map[string]func(*envelope.RefusalSummary){
		"no id":               func(s *envelope.RefusalSummary) { s.ID = "" },
		"no integration":      func(s *envelope.RefusalSummary) { s.Integration = "" },
		"NUL in instance":     func(s *envelope.RefusalSummary) { s.Instance = "a\x00b" },
		"window backwards":    func(s *envelope.RefusalSummary) { s.WindowEnd = s.WindowStart.Add(-time.Second) },
		"no window":           func(s *envelope.RefusalSummary) { s.WindowStart = time.Time{} },
		"no counts":           func(s *envelope.RefusalSummary) { s.Counts = nil },
		"a 200 is no refusal": func(s *envelope.RefusalSummary) { s.Counts[0].StatusCode = 200 },
		"zero count":          func(s *envelope.RefusalSummary) { s.Counts[0].Count = 0 },
		"negative count":      func(s *envelope.RefusalSummary) { s.Counts[0].Count = -5 },
		"empty reason":        func(s *envelope.RefusalSummary) { s.Counts[0].Reason = "" },
		"long reason":         func(s *envelope.RefusalSummary) { s.Counts[0].Reason = strings.Repeat("x", 65) },
		"too many counts": func(s *envelope.RefusalSummary) {
			s.Counts = make([]envelope.RefusalCount, envelope.MaxRefusalCounts+1)
			for i := range s.Counts {
				s.Counts[i] = envelope.RefusalCount{StatusCode: 401, Reason: "r", Count: 1}
			}
		},
	} {
		s := validSummary()
		mutate(&s)
		b, err := envelope.MarshalRefusalSummary(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := envelope.ParseRefusalSummary(b); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	if _, err := envelope.ParseRefusalSummary([]byte(`{"id":`)); err == nil {
		t.Error("truncated JSON: parsed")
	}
}

// FuzzParseRefusalSummary: any input parses or is refused, and what parses
// holds only what the fold can store.
func FuzzParseRefusalSummary(f *testing.F) {
	b, _ := envelope.MarshalRefusalSummary(validSummary())
	f.Add(b)
	f.Add([]byte(`{"id":"x","integration":"d","window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:00:00Z","counts":[{"status_code":599,"reason":"r","count":1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := envelope.ParseRefusalSummary(b)
		if err != nil {
			return
		}
		if s.ID == "" || s.Integration == "" || !utf8.ValidString(s.Instance) || s.WindowEnd.Before(s.WindowStart) {
			t.Fatalf("parsed an invalid summary: %+v", s)
		}
		for _, c := range s.Counts {
			if c.Count < 1 || c.StatusCode < 400 || c.StatusCode > 599 || c.Reason == "" || strings.ContainsRune(c.Reason, 0) {
				t.Fatalf("parsed an invalid count: %+v", c)
			}
		}
	})
}
