package replayer

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
)

const (
	authViewer   = "viewer-token-0123456789"
	authOperator = "operator-token-0123456789"
)

type authSetup struct {
	h        http.Handler
	failures *prometheus.CounterVec
	logs     *testenv.Buffer
}

func setupAuth(t *testing.T, o AuthOptions) authSetup {
	t.Helper()
	sum := sha256.Sum256([]byte(authOperator))
	tokens := []config.Token{
		{Name: "viewer", Token: authViewer, Role: config.RoleViewer},
		{Name: "ops", TokenSHA256: hex.EncodeToString(sum[:]), Role: config.RoleOperator},
	}
	s := authSetup{logs: &testenv.Buffer{}, failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "f"}, []string{"reason"})}
	o.Log = slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.Failures = s.failures
	s.h = RequireToken(tokens, o)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := CallerFrom(r.Context())
		_, _ = w.Write([]byte(c.Name))
	}))
	return s
}

func (s authSetup) call(addr, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/api/v1/events", nil)
	r.RemoteAddr = addr
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, r)
	return w
}

func TestRequireTokenAuthenticates(t *testing.T) {
	s := setupAuth(t, AuthOptions{})
	for token, want := range map[string]string{authViewer: "viewer", authOperator: "ops"} {
		if w := s.call("192.0.2.1:1000", token); w.Code != http.StatusOK || w.Body.String() != want {
			t.Errorf("token of %s: %d %s", want, w.Code, w.Body)
		}
	}
	// The configured digest is not a token.
	sum := sha256.Sum256([]byte(authOperator))
	if w := s.call("192.0.2.1:1000", hex.EncodeToString(sum[:])); w.Code != http.StatusUnauthorized {
		t.Errorf("the digest authenticated: %d", w.Code)
	}
}

// TestFailedAuthenticationIsLoggedAndCounted: the client address and the
// reason are logged, never the token; failures are counted by reason.
func TestFailedAuthenticationIsLoggedAndCounted(t *testing.T) {
	s := setupAuth(t, AuthOptions{})
	const guess = "guessed-token-abcdef0123"
	if w := s.call("192.0.2.7:4321", guess); w.Code != http.StatusUnauthorized {
		t.Fatalf("invalid token: %d", w.Code)
	}
	if w := s.call("192.0.2.8:4321", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", w.Code)
	}
	if got := testutil.ToFloat64(s.failures.WithLabelValues("invalid")); got != 1 {
		t.Errorf("invalid failures = %v", got)
	}
	if got := testutil.ToFloat64(s.failures.WithLabelValues("missing")); got != 1 {
		t.Errorf("missing failures = %v", got)
	}
	logs := s.logs.String()
	for _, want := range []string{"client=192.0.2.7 reason=invalid", "client=192.0.2.8 reason=missing"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, guess) {
		t.Errorf("the log shows the token:\n%s", logs)
	}
}

// TestFailedAuthenticationIsThrottled: after MaxFailures invalid tokens an
// address gets 429 with Retry-After, even with a valid token; other
// addresses are not affected.
func TestFailedAuthenticationIsThrottled(t *testing.T) {
	s := setupAuth(t, AuthOptions{MaxFailures: 3, FailureWindow: time.Minute})
	for i := range 3 {
		if w := s.call("192.0.2.9:1", "wrong-token-000000000"+strconv.Itoa(i)); w.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i, w.Code)
		}
	}
	w := s.call("192.0.2.9:2", authOperator)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("valid token after 3 failures: %d, want 429", w.Code)
	}
	if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || ra < 1 || ra > 20 {
		t.Errorf("Retry-After = %q, want the ~20s until one failure is forgiven", w.Header().Get("Retry-After"))
	}
	if got := testutil.ToFloat64(s.failures.WithLabelValues("throttled")); got != 1 {
		t.Errorf("throttled = %v", got)
	}
	if w := s.call("192.0.2.10:1", authOperator); w.Code != http.StatusOK {
		t.Errorf("another address: %d", w.Code)
	}
	if w := s.call("[2001:db8::1]:1", authOperator); w.Code != http.StatusOK {
		t.Errorf("an IPv6 address: %d", w.Code)
	}
}

// TestFailureThrottleCoolsDown: a throttled address may try again once the
// window has refilled a failure, and fully once it refilled them all.
func TestFailureThrottleCoolsDown(t *testing.T) {
	th := newFailureThrottle(2, time.Minute, 10)
	t0 := time.Unix(1_000_000, 0)
	th.fail("a", t0)
	if _, blocked := th.blocked("a", t0); blocked {
		t.Fatal("blocked after one failure of two")
	}
	th.fail("a", t0)
	wait, blocked := th.blocked("a", t0)
	if !blocked || wait != 30*time.Second {
		t.Fatalf("after two failures: blocked %v, wait %s (want 30s)", blocked, wait)
	}
	if _, blocked := th.blocked("a", t0.Add(29*time.Second)); !blocked {
		t.Fatal("cooled down early")
	}
	if _, blocked := th.blocked("a", t0.Add(30*time.Second)); blocked {
		t.Fatal("still blocked after a failure's share of the window")
	}
}

// TestFailureThrottleMemoryIsBounded: many addresses never grow the map
// beyond MaxClients; cooled-down ones go first, then the oldest.
func TestFailureThrottleMemoryIsBounded(t *testing.T) {
	th := newFailureThrottle(2, time.Minute, 100)
	t0 := time.Unix(1_000_000, 0)
	th.fail("victim", t0)
	th.fail("victim", t0)
	for i := range 10_000 {
		th.fail("198.51.100."+strconv.Itoa(i), t0.Add(time.Millisecond))
	}
	if n := th.tracked(); n > 100 {
		t.Fatalf("tracks %d addresses, want at most 100", n)
	}
	// Cooled down, they are forgotten before a throttled one.
	th2 := newFailureThrottle(2, time.Minute, 2)
	th2.fail("once", t0)
	t1 := t0.Add(40 * time.Second) // "once" has cooled down
	th2.fail("blocked", t1)
	th2.fail("blocked", t1)
	th2.fail("new", t1)
	if _, blocked := th2.blocked("blocked", t1); !blocked {
		t.Fatal("evicted a throttled address while cooled-down ones were there")
	}
}

func TestThrottleKeyGroupsIPv6By64(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.7":            "192.0.2.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1": "2001:db8:1:2::/64",
		"2001:db8:1:3::1":      "2001:db8:1:3::/64",
		"::ffff:192.0.2.7":     "::ffff:192.0.2.7",
		"not-an-address":       "not-an-address",
	} {
		if got := throttleKey(addr); got != want {
			t.Errorf("throttleKey(%s) = %s, want %s", addr, got, want)
		}
	}
}
