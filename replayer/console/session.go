package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/replayer"
)

// Cookie names. The session cookie is scoped to /ui/, HttpOnly,
// SameSite=Strict, and Secure when the request came over TLS.
const (
	sessionCookie = "intake_console"
	// preCookie is the sign-in form's double-submit CSRF value: a forged
	// sign-in (into the attacker's session) lacks it.
	preCookie = "intake_console_pre"
)

// DefaultSessionTTL is how long a session lasts after sign-in.
const DefaultSessionTTL = 8 * time.Hour

// sessionKeyLabel derives a token's session key from its digest: the key
// differs per token, so a session names the token it was signed with.
const sessionKeyLabel = "intake console session v1"

// signer signs and verifies session cookies with keys derived from the
// configured tokens' digests.
type signer struct {
	tokens map[string]tokenKey // by tokenID
	ttl    time.Duration

	mu      sync.Mutex
	revoked map[string]time.Time // nonce → expiry: sessions signed out here
}

type tokenKey struct {
	key  []byte
	name string
	role config.Role
}

// session is a verified cookie.
type session struct {
	caller  replayer.Caller
	nonce   string
	expires time.Time
	key     []byte
}

// csrf is the session's CSRF token: forms carry it, POSTs must match it.
func (s session) csrf() string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("csrf|" + s.nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s session) operator() bool { return s.caller.Role == config.RoleOperator }

func newSigner(tokens []config.Token, ttl time.Duration) *signer {
	s := &signer{tokens: map[string]tokenKey{}, ttl: ttl, revoked: map[string]time.Time{}}
	for _, t := range tokens {
		sum := t.Sum()
		m := hmac.New(sha256.New, sum[:])
		m.Write([]byte(sessionKeyLabel))
		s.tokens[tokenID(sum)] = tokenKey{key: m.Sum(nil), name: t.Name, role: t.Role}
	}
	return s
}

// tokenID names a token in a cookie without revealing its digest.
func tokenID(sum [sha256.Size]byte) string {
	id := sha256.Sum256(append([]byte("intake console token id|"), sum[:]...))
	return hex.EncodeToString(id[:8])
}

// sign returns the cookie value of a new session of the token with digest sum.
func (s *signer) sign(sum [sha256.Size]byte, now time.Time) (string, bool) {
	id := tokenID(sum)
	tk, ok := s.tokens[id]
	if !ok {
		return "", false
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	payload := "v1." + id + "." + strconv.FormatInt(now.Add(s.ttl).Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(nonce)
	return payload + "." + mac(tk.key, payload), true
}

// verify checks a cookie value: signature, expiry, token still configured,
// not signed out here.
func (s *signer) verify(v string, now time.Time) (session, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 5 || parts[0] != "v1" {
		return session{}, false
	}
	tk, ok := s.tokens[parts[1]]
	if !ok {
		return session{}, false
	}
	payload := strings.Join(parts[:4], ".")
	if subtle.ConstantTimeCompare([]byte(mac(tk.key, payload)), []byte(parts[4])) != 1 {
		return session{}, false
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || !now.Before(time.Unix(exp, 0)) {
		return session{}, false
	}
	s.mu.Lock()
	_, out := s.revoked[parts[3]]
	s.mu.Unlock()
	if out {
		return session{}, false
	}
	return session{caller: replayer.Caller{Name: tk.name, Role: tk.role}, nonce: parts[3], expires: time.Unix(exp, 0), key: tk.key}, true
}

// revoke ends a session on this replayer before its expiry (sign-out; the
// browser drops the cookie too). Expired entries are dropped as it goes.
func (s *signer) revoke(sess session, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, exp := range s.revoked {
		if !now.Before(exp) {
			delete(s.revoked, n)
		}
	}
	s.revoked[sess.nonce] = sess.expires
}

func mac(key []byte, payload string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, expires time.Time) {
	c := &http.Cookie{Name: name, Value: value, Path: "/ui/", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode}
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
