package replayer

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/telemetry"
)

type ctxKey struct{}

// Caller is the authenticated token's name and role.
type Caller struct {
	Name string
	Role config.TokenRole
}

// CallerFrom returns the caller RequireToken stored in ctx.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(ctxKey{}).(Caller)
	return c, ok
}

type token struct {
	sum  [32]byte
	name string
	role config.TokenRole
}

// AuthOptions configure RequireToken.
type AuthOptions struct {
	// Log gets one line per failed authentication: the client address and
	// the reason, never the token. Defaults to discarding.
	Log *slog.Logger
	// Failures, when set, counts failed authentications by reason
	// (missing, invalid, throttled).
	Failures *prometheus.CounterVec
	// MaxFailures is how many invalid tokens a client address may present
	// per FailureWindow; then it gets 429 with Retry-After, even with a
	// valid token, until the window refills. Defaults to
	// DefaultMaxAuthFailures (10).
	MaxFailures int
	// FailureWindow: see MaxFailures. Defaults to DefaultAuthFailureWindow (1m).
	FailureWindow time.Duration
	// MaxClients bounds the client addresses whose failures are remembered.
	// Defaults to DefaultMaxAuthClients (10,000).
	MaxClients int
}

// Defaults of AuthOptions.
const (
	DefaultMaxAuthFailures   = 10
	DefaultAuthFailureWindow = time.Minute
	DefaultMaxAuthClients    = 10_000
)

// WithDefaults returns o with every unset field at its default.
func (o AuthOptions) WithDefaults() AuthOptions {
	if o.Log == nil {
		o.Log = telemetry.Discard()
	}
	o.MaxFailures = cmp.Or(o.MaxFailures, DefaultMaxAuthFailures)
	o.FailureWindow = cmp.Or(o.FailureWindow, DefaultAuthFailureWindow)
	o.MaxClients = cmp.Or(o.MaxClients, DefaultMaxAuthClients)
	return o
}

// Reasons an authentication fails, the label of Failures.
const (
	authMissing   = "missing"
	authInvalid   = "invalid"
	authThrottled = "throttled"
)

// RequireToken authenticates `Authorization: Bearer <token>` against tokens:
// 401 without a valid one. Tokens are compared as SHA-256 digests in constant
// time (a token_sha256 in the config is that digest), and every configured
// token is compared, so timing reveals neither the token nor which one
// matched. A client address that presented o.MaxFailures invalid tokens
// within o.FailureWindow gets 429 with Retry-After until it cools down.
func RequireToken(tokens []config.Token, o AuthOptions) func(http.Handler) http.Handler {
	o = o.WithDefaults()
	known := make([]token, len(tokens))
	for i, t := range tokens {
		known[i] = token{sum: t.Sum(), name: t.Name, role: t.Role}
	}
	throttle := newFailureThrottle(o.MaxFailures, o.FailureWindow, o.MaxClients)
	failed := func(r *http.Request, addr, reason string) {
		if o.Failures != nil {
			o.Failures.WithLabelValues(reason).Inc()
		}
		level := slog.LevelWarn
		if reason == authThrottled {
			level = slog.LevelDebug // the failures that led here were logged
		}
		o.Log.Log(r.Context(), level, "api: authentication failed", "client", addr, "reason", reason,
			"method", r.Method, "path", r.URL.Path)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			addr := clientAddr(r)
			if wait, blocked := throttle.blocked(throttleKey(addr), time.Now()); blocked {
				failed(r, addr, authThrottled)
				w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
				writeError(w, http.StatusTooManyRequests, "too many failed authentications from this address: retry later")
				return
			}
			raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || raw == "" {
				failed(r, addr, authMissing)
				w.Header().Set("WWW-Authenticate", `Bearer realm="intake"`)
				writeError(w, http.StatusUnauthorized, "missing bearer token")
				return
			}
			sum := sha256.Sum256([]byte(raw))
			match := -1
			for i := range known {
				if subtle.ConstantTimeCompare(sum[:], known[i].sum[:]) == 1 {
					match = i
				}
			}
			if match < 0 {
				throttle.fail(throttleKey(addr), time.Now())
				failed(r, addr, authInvalid)
				w.Header().Set("WWW-Authenticate", `Bearer realm="intake", error="invalid_token"`)
				writeError(w, http.StatusUnauthorized, "invalid token")
				return
			}
			c := Caller{Name: known[match].name, Role: known[match].role}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, c)))
		})
	}
}

// clientAddr is the request's peer address without its port. Forwarding
// headers are not trusted: anyone can set them.
func clientAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// throttleKey groups IPv6 peers by their /64: one host is routinely given a
// whole /64, and a key per /128 would let it rotate past the throttle.
func throttleKey(addr string) string {
	ip := net.ParseIP(addr)
	if ip == nil || ip.To4() != nil {
		return addr
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// RequireRole answers 403 unless the caller has role (operator implies viewer).
func RequireRole(role config.TokenRole) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, ok := CallerFrom(r.Context())
			if !ok || (role == config.RoleOperator && c.Role != config.RoleOperator) {
				writeError(w, http.StatusForbidden, "token lacks role "+string(role))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
