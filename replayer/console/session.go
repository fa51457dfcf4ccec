package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer"
)

// Cookie names. Both cookies are HttpOnly and SameSite=Strict. Served
// over TLS, or over plain HTTP for any host but a loopback one (behind an
// Ingress that terminates TLS the replayer sees plain HTTP for the public
// name), they are Secure, named with the __Host- prefix and scoped to
// Path=/ (the prefix requires it): a browser then neither sends them over
// plain HTTP nor lets a plain-HTTP answer plant one. Over plain HTTP to
// localhost or a loopback address (intake dev, a port-forward) they are
// the bare names scoped to /ui/, which every browser keeps over HTTP.
const (
	sessionCookie = "intake_console"
	// preCookie is the sign-in form's double-submit CSRF value: a forged
	// sign-in (into the attacker's session) lacks it.
	preCookie = "intake_console_pre"
	// hostPrefix is the cookie prefix browsers accept only with Secure,
	// Path=/ and no Domain.
	hostPrefix = "__Host-"
)

// DefaultSessionTTL is how long a session lasts after sign-in.
const DefaultSessionTTL = 8 * time.Hour

// sessionIDBytes is the size of a session's random id (256 bits).
const sessionIDBytes = 32

// sessions are kept server-side in Postgres (store.ConsoleSession): the
// cookie is a random id, the row (under the id's SHA-256) names the token,
// the expiry and the CSRF token. Nothing a config, a ConfigMap or the
// database holds lets anyone make a cookie, and a sign-out deletes the row,
// which every replayer reads.
type sessions struct {
	st     *store.Store
	tokens map[string]tokenInfo // by tokenID
	ttl    time.Duration
}

type tokenInfo struct {
	name string
	role config.TokenRole
}

// session is a signed-in request's session.
type session struct {
	caller    replayer.Caller
	id        [sha256.Size]byte // the cookie id's SHA-256: the row's key
	csrfToken string
}

// csrf is the session's CSRF token: forms carry it, POSTs must match it.
func (s session) csrf() string { return s.csrfToken }

func (s session) signedIn() bool { return s.caller.Name != "" }

func (s session) operator() bool { return s.caller.Role == config.RoleOperator }

// errNoSession: the cookie names no good session (unknown, expired,
// malformed, or of a token this replayer's config no longer has).
var errNoSession = errors.New("console: no such session")

func newSessions(st *store.Store, tokens []config.Token, ttl time.Duration) *sessions {
	s := &sessions{st: st, tokens: map[string]tokenInfo{}, ttl: ttl}
	for _, t := range tokens {
		s.tokens[tokenID(t.Sum())] = tokenInfo{name: t.Name, role: t.Role}
	}
	return s
}

// tokenID names a token in a session row: a digest of its digest, so the
// row does not hold what the API compares a token with.
func tokenID(sum [sha256.Size]byte) string {
	id := sha256.Sum256(append([]byte("intake console token id|"), sum[:]...))
	return hex.EncodeToString(id[:])
}

// create signs in the token with digest sum: a new session row, and the
// cookie value (the id) that names it. ok is false for a token not in the
// config.
func (s *sessions) create(ctx context.Context, sum [sha256.Size]byte, now time.Time) (value string, sess session, expires time.Time, ok bool, err error) {
	tid := tokenID(sum)
	tk, ok := s.tokens[tid]
	if !ok {
		return "", session{}, time.Time{}, false, nil
	}
	raw := make([]byte, sessionIDBytes)
	_, _ = rand.Read(raw)
	csrf := make([]byte, sessionIDBytes)
	_, _ = rand.Read(csrf)
	sess = session{caller: replayer.Caller{Name: tk.name, Role: tk.role}, id: sha256.Sum256(raw),
		csrfToken: base64.RawURLEncoding.EncodeToString(csrf)}
	expires = now.Add(s.ttl)
	if _, err := s.st.CreateConsoleSession(ctx, sess.id, store.ConsoleSession{TokenID: tid, TokenName: tk.name, Role: string(tk.role),
		CSRF: sess.csrfToken, CreatedAt: now, ExpiresAt: expires}); err != nil {
		return "", session{}, time.Time{}, true, err
	}
	return base64.RawURLEncoding.EncodeToString(raw), sess, expires, true, nil
}

// verify reads the session a cookie value names: stored, not expired,
// signed in less than the TTL ago, and of a token still in this replayer's
// config (whose name and role it takes). errNoSession when it is not;
// another error when the store could not say.
func (s *sessions) verify(ctx context.Context, value string, now time.Time) (session, error) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(value)
	if err != nil || len(raw) != sessionIDBytes {
		return session{}, errNoSession
	}
	id := sha256.Sum256(raw)
	row, err := s.st.ConsoleSession(ctx, id, now, s.ttl)
	if errors.Is(err, store.ErrNotFound) {
		return session{}, errNoSession
	}
	if err != nil {
		return session{}, err
	}
	tk, ok := s.tokens[row.TokenID]
	if !ok {
		return session{}, errNoSession
	}
	return session{caller: replayer.Caller{Name: tk.name, Role: tk.role}, id: id, csrfToken: row.CSRF}, nil
}

// end deletes the session: signed out on every replayer.
func (s *sessions) end(ctx context.Context, sess session) error {
	return s.st.DeleteConsoleSession(ctx, sess.id)
}

// secureCookies reports whether r's cookies are Secure (and __Host-): for
// every request but one over plain HTTP to a loopback host.
func secureCookies(r *http.Request) bool {
	return r.TLS != nil || !loopbackHost(r.Host)
}

// loopbackHost: localhost, a name under .localhost or a loopback address,
// with or without a port.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return err == nil && ip.Unmap().IsLoopback()
}

// cookieName is the name of cookie base for r.
func cookieName(r *http.Request, base string) string {
	if secureCookies(r) {
		return hostPrefix + base
	}
	return base
}

// readCookie returns the value of cookie base as r's scheme names it (a
// secure request reads the __Host- name only: a cookie without the prefix
// may have been planted over plain HTTP).
func readCookie(r *http.Request, base string) (string, bool) {
	ck, err := r.Cookie(cookieName(r, base))
	if err != nil {
		return "", false
	}
	return ck.Value, true
}

func setCookie(w http.ResponseWriter, r *http.Request, base, value string, expires time.Time) {
	c := &http.Cookie{Name: base, Value: value, Path: Prefix + "/", HttpOnly: true, SameSite: http.SameSiteStrictMode}
	if secureCookies(r) {
		c.Name, c.Path, c.Secure = hostPrefix+base, "/", true
	}
	if value == "" {
		c.MaxAge = -1
	} else if !expires.IsZero() {
		c.Expires = expires
	}
	http.SetCookie(w, c)
}

func randomToken() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
