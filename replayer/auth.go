package replayer

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/intakehq/intake/pkg/config"
)

type ctxKey struct{}

// Caller is the authenticated token's name and role.
type Caller struct {
	Name string
	Role config.Role
}

// CallerFrom returns the caller RequireToken stored in ctx.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(ctxKey{}).(Caller)
	return c, ok
}

type token struct {
	sum  [32]byte
	name string
	role config.Role
}

// RequireToken authenticates `Authorization: Bearer <token>` against tokens:
// 401 without a valid one. Tokens are compared as SHA-256 digests in constant
// time, and every configured token is compared, so timing reveals neither
// the token nor which one matched.
func RequireToken(tokens []config.Token) func(http.Handler) http.Handler {
	known := make([]token, len(tokens))
	for i, t := range tokens {
		known[i] = token{sum: sha256.Sum256([]byte(t.Token)), name: t.Name, role: t.Role}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || raw == "" {
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
				w.Header().Set("WWW-Authenticate", `Bearer realm="intake", error="invalid_token"`)
				writeError(w, http.StatusUnauthorized, "invalid token")
				return
			}
			c := Caller{Name: known[match].name, Role: known[match].role}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, c)))
		})
	}
}

// RequireRole answers 403 unless the caller has role (operator implies viewer).
func RequireRole(role config.Role) func(http.Handler) http.Handler {
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
