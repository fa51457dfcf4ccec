package dispatcher

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
)

const (
	secretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secretB = "whsec_c2VjcmV0LWtleS1udW1iZXItdHdvLWZvci1yb3RhdGlvbg=="
)

// The signatures verify with the Standard Webhooks reference library, each
// secret's on its own (a receiver in the middle of a rotation holds one).
func TestSignVerifiesWithTheReferenceLibrary(t *testing.T) {
	s, err := newSigner([]string{secretA, secretB})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"invoice.paid","amount":4200}`)
	now := time.Now()
	sig := s.sign("0b3c6a1e-msg", now.Unix(), body)
	if again := s.sign("0b3c6a1e-msg", now.Unix(), body); again != sig {
		t.Fatalf("signed twice (the second with reused HMAC states): %q, then %q", sig, again)
	}
	if n := len(strings.Fields(sig)); n != 2 {
		t.Fatalf("signature %q: %d signatures, want one per secret", sig, n)
	}
	h := http.Header{}
	h.Set("webhook-id", "0b3c6a1e-msg")
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", sig)
	for _, secret := range []string{secretA, secretB} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("%s…: the reference library refuses our signature: %v", secret[:10], err)
		}
		if err := wh.Verify(append(body, ' '), h); err == nil {
			t.Errorf("%s…: a changed body verified", secret[:10])
		}
	}
	// And what the reference library signs is what we sign.
	wh, _ := standardwebhooks.NewWebhook(secretA)
	want, err := wh.Sign("0b3c6a1e-msg", now, body)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(sig)[0]; got != want {
		t.Errorf("signature %q, the reference library's %q", got, want)
	}
}

func TestDecide(t *testing.T) {
	d := config.Destination{Retry: []time.Duration{time.Second, time.Minute}, RetryStatuses: []int{409}}
	for _, tt := range []struct {
		name    string
		r       result
		attempt int
		outcome string
		wait    time.Duration
	}{
		{"200", result{status: 200}, 1, store.DispatchDelivered, 0},
		{"204 on the last attempt", result{status: 204}, 3, store.DispatchDelivered, 0},
		{"503 first", result{status: 503, class: ClassServerError}, 1, store.DispatchRetry, time.Second},
		{"500 second", result{status: 500}, 2, store.DispatchRetry, time.Minute},
		{"500 past the schedule", result{status: 500}, 3, store.DispatchFailed, 0},
		{"timeout", result{class: ClassTimeout}, 1, store.DispatchRetry, time.Second},
		{"refused", result{class: ClassConnect}, 2, store.DispatchRetry, time.Minute},
		{"408", result{status: 408}, 1, store.DispatchRetry, time.Second},
		{"429", result{status: 429}, 1, store.DispatchRetry, time.Second},
		{"429 Retry-After longer", result{status: 429, retryAfter: 30 * time.Second}, 1, store.DispatchRetry, 30 * time.Second},
		{"429 Retry-After shorter", result{status: 429, retryAfter: time.Millisecond}, 2, store.DispatchRetry, time.Minute},
		{"503 Retry-After capped", result{status: 503, retryAfter: 100 * time.Hour}, 1, store.DispatchRetry, config.MaxRetryAfter},
		{"400 fails at once", result{status: 400}, 1, store.DispatchFailed, 0},
		{"401 fails at once", result{status: 401}, 1, store.DispatchFailed, 0},
		{"404 fails at once", result{status: 404}, 1, store.DispatchFailed, 0},
		{"409 listed: retries", result{status: 409}, 1, store.DispatchRetry, time.Second},
		{"302 is not followed and fails", result{status: 302}, 1, store.DispatchFailed, 0},
		{"101 fails", result{status: 101}, 1, store.DispatchFailed, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			outcome, wait := decide(tt.r, tt.attempt, d)
			if outcome != tt.outcome || wait != tt.wait {
				t.Errorf("decide = %s after %s, want %s after %s", outcome, wait, tt.outcome, tt.wait)
			}
		})
	}
}

func TestClassOf(t *testing.T) {
	for status, want := range map[int]string{200: "", 299: "", 301: ClassRedirect, 308: ClassRedirect, 400: ClassClientError,
		429: ClassRateLimited, 499: ClassClientError, 500: ClassServerError, 503: ClassServerError, 100: ClassStatus, 600: ClassStatus} {
		if got := classOf(status); got != want {
			t.Errorf("classOf(%d) = %q, want %q", status, got, want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "5": 5 * time.Second, " 120 ": 2 * time.Minute, "0": 0, "-3": 0, "soon": 0,
		"Sat, 05 Dec 2026 10:01:00 GMT": time.Minute, "Sat, 05 Dec 2026 09:00:00 GMT": 0,
		"99999999999999999999": 0,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

func TestBreaker(t *testing.T) {
	b := newBreaker(config.DestinationBreaker{Failures: 3, Probe: time.Second})
	now := time.Now()
	allow := func(want, wantProbe bool) {
		t.Helper()
		ok, probe, _ := b.allow(now)
		if ok != want || probe != wantProbe {
			t.Fatalf("allow = %v (probe %v), want %v (probe %v)", ok, probe, want, wantProbe)
		}
	}
	allow(true, false)
	for range 2 {
		if changed, _ := b.record(now, false); changed {
			t.Fatal("opened before 3 failures in a row")
		}
	}
	b.record(now, true) // an answer resets the count
	for range 2 {
		b.record(now, false)
	}
	if changed, open := b.record(now, false); !changed || !open {
		t.Fatal("3 failures in a row did not open the breaker")
	}
	allow(false, false)
	now = now.Add(time.Second)
	allow(true, true)   // the probe
	allow(false, false) // one probe at a time
	if changed, open := b.record(now, false); changed || !open {
		t.Fatal("a failed probe closed the breaker")
	}
	now = now.Add(time.Second)
	allow(false, false) // the wait doubled: 2s
	now = now.Add(time.Second)
	allow(true, true)
	b.cancelProbe() // nothing to deliver: the probe goes back
	allow(true, true)
	if changed, open := b.record(now, true); !changed || open {
		t.Fatal("an answered probe did not close the breaker")
	}
	allow(true, false)
	// Closed again, it takes the threshold again, and the wait starts from the base.
	for range 3 {
		b.record(now, false)
	}
	allow(false, false)
	now = now.Add(time.Second)
	allow(true, true)
}

func TestMatchType(t *testing.T) {
	for _, tt := range []struct {
		patterns []string
		typ      string
		want     bool
	}{
		{nil, "anything", true},
		{[]string{"invoice.*"}, "invoice.paid", true},
		{[]string{"invoice.*"}, "invoice", false},
		{[]string{"invoice.*"}, "customer.created", false},
		{[]string{"a", "customer.*"}, "customer.created", true},
		{[]string{"orders/*"}, "orders/create", true},
	} {
		if got := matchType(tt.patterns, tt.typ); got != tt.want {
			t.Errorf("matchType(%q, %q) = %v", tt.patterns, tt.typ, got)
		}
	}
}

func TestContentType(t *testing.T) {
	for body, want := range map[string]string{
		`{"a":1}`: "application/json", " \n\t[1]": "application/json", `"s"`: "application/octet-stream",
		"amount=5&currency=eur": "application/octet-stream", "": "application/octet-stream", "  ": "application/octet-stream",
		"\xff{": "application/octet-stream",
	} {
		if got := contentType([]byte(body))[0]; got != want {
			t.Errorf("contentType(%q) = %s, want %s", body, got, want)
		}
	}
}

// The log writer's batch: what waits is taken at once up to logBatch; a
// batch under logFill waits for more until the linger fires; a closed,
// drained queue ends the writer.
func TestLogWriterFill(t *testing.T) {
	w := &logWriter{in: make(chan entry, logQueue)}
	linger := make(chan time.Time, 1)

	for range logBatch + 10 {
		w.in <- entry{}
	}
	var batch []entry
	if !w.fill(&batch, linger) || len(batch) != logBatch {
		t.Fatalf("a full queue: batch of %d, want %d", len(batch), logBatch)
	}

	// 10 waiting, under logFill: fill waits; 5 more arrive, then the linger.
	batch = batch[:0]
	done := make(chan bool)
	go func() { done <- w.fill(&batch, linger) }()
	for range 5 {
		w.in <- entry{}
	}
	select {
	case <-done:
		t.Fatal("fill returned under logFill before the linger fired")
	case <-time.After(50 * time.Millisecond):
	}
	linger <- time.Now()
	if !<-done || len(batch) != 15 {
		t.Fatalf("after the linger: batch of %d, want 15", len(batch))
	}

	// logFill waiting: no wait for the linger.
	batch = batch[:0]
	for range logFill {
		w.in <- entry{}
	}
	if !w.fill(&batch, make(chan time.Time)) || len(batch) != logFill {
		t.Fatalf("logFill waiting: batch of %d, want %d", len(batch), logFill)
	}

	// Closed: what is left, then false.
	batch = batch[:0]
	w.in <- entry{}
	close(w.in)
	if w.fill(&batch, make(chan time.Time)) || len(batch) != 1 {
		t.Fatalf("closed: batch of %d, want 1 and the end", len(batch))
	}
}

// Failed probes double the wait up to config.BreakerProbeCeiling, or the
// configured first wait when that is longer.
func TestBreakerProbeWaitCeiling(t *testing.T) {
	for _, c := range []struct {
		probe time.Duration
		want  []time.Duration // the waits after each failed probe
	}{
		{30 * time.Second, []time.Duration{time.Minute, 2 * time.Minute, 2 * time.Minute}},
		{5 * time.Minute, []time.Duration{5 * time.Minute, 5 * time.Minute}},
	} {
		b := newBreaker(config.DestinationBreaker{Failures: 1, Probe: c.probe})
		now := time.Now()
		b.record(now, false) // opens
		for i, want := range c.want {
			now = now.Add(time.Hour)
			if ok, probe, _ := b.allow(now); !ok || !probe {
				t.Fatalf("probe %s: no probe after an hour", c.probe)
			}
			b.record(now, false)
			if ok, _, retry := b.allow(now); ok || retry != want {
				t.Errorf("probe %s: after failed probe %d the wait is %s (allowed %v), want %s", c.probe, i+1, retry, ok, want)
			}
		}
	}
}

// A destination fetches three max_in_flights ahead, but never more than
// maxFetchAhead messages.
func TestFetchAhead(t *testing.T) {
	for n, want := range map[int]int{1: 3, 16: 48, 85: 255, 86: 256, 1024: 256} {
		if got := fetchAhead(n); got != want {
			t.Errorf("fetchAhead(%d) = %d, want %d", n, got, want)
		}
	}
}
