package provider

// Mailgun (webhooks 2.0): the signature is inside the JSON body, not in a
// header — {"signature": {"timestamp": "…", "token": "…", "signature":
// hex HMAC-SHA256(signing key, timestamp + token)}, "event-data": {…}} —
// and it covers the timestamp and the token only, NOT the event. So:
//
//   - the body is parsed only after ingress bounded its size and depth, and
//     the three fields are read strictly (duplicated keys refused, as for
//     every identity field);
//   - the timestamp (unix seconds, canonical) must lie within ± tolerance;
//   - a token already seen with another body is refused (401): a captured
//     signature block cannot carry a forged event. The same token with the
//     same bytes is the sender's retry, left to deduplication. The cache is
//     this process's (bounded: maxMailgunTokens, each kept for twice the
//     tolerance), so with several ingress replicas a captured block can be
//     used once per replica within the window; the replay guard then still
//     refuses the captured body under a new id, and a short tolerance
//     narrows the window. TLS remains the event's integrity.
//
// Identity: event id event-data.id, type event-data.event.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/intakehq/intake/internal/hmacpool"
)

// maxMailgunTokens bounds the token cache of one integration.
const maxMailgunTokens = 1 << 16

type mailgun struct {
	keys      []*hmacpool.Key // HMAC-SHA256, one per secret
	tolerance time.Duration
	identity  identityReader
	tokens    *tokenCache
}

func newMailgun(cfg Config) (Verifier, error) {
	m := &mailgun{keys: hmacKeys(sha256.New, cfg.Secrets), tolerance: cfg.Tolerance, tokens: newTokenCache(maxMailgunTokens)}
	var err error
	m.identity, err = newIdentity(cfg, identityFields{
		eventID:   Field{Field: "event-data.id"},
		eventType: Field{Field: "event-data.event"},
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *mailgun) Verify(d *Request) (Identity, error) {
	body := jsonBody{raw: d.Body}
	var f [3]string
	for i, path := range []string{"signature.timestamp", "signature.token", "signature.signature"} {
		v, err := body.field(path)
		if err != nil {
			return Identity{}, fmt.Errorf("%w (body %s)", ErrBadSignature, path)
		}
		if v == "" {
			return Identity{}, fmt.Errorf("%w: body %s", ErrMissingHeader, path)
		}
		f[i] = v
	}
	ts, token, sig := f[0], f[1], f[2]
	t, err := formatUnix.parse(ts, true)
	if err == nil {
		err = windowBoth.check(t, d.now(), m.tolerance)
	}
	if err != nil {
		return Identity{}, fmt.Errorf("%w (body signature.timestamp)", err)
	}
	if len(token) > 256 {
		return Identity{}, fmt.Errorf("%w: body signature.token is too long", ErrBadSignature)
	}
	var want [sha256.Size]byte
	if len(sig) != hex.EncodedLen(sha256.Size) {
		return Identity{}, fmt.Errorf("%w: body signature.signature is not 64 hex digits", ErrBadSignature)
	}
	if _, err := hex.Decode(want[:], []byte(sig)); err != nil {
		return Identity{}, fmt.Errorf("%w: body signature.signature is not hex", ErrBadSignature)
	}
	idx := firstMatch(m.keys, want[:], []byte(ts), []byte(token))
	if idx < 0 {
		return Identity{}, fmt.Errorf("%w: body signature.signature does not match", ErrBadSignature)
	}
	ev := Identity{SecretIndex: idx}
	if err := m.identity.read(d.Header, &body, &ev); err != nil {
		return Identity{}, err
	}
	// Last: only a delivery that would be accepted claims its token.
	if !m.tokens.claim(token, sha256.Sum256(d.Body), d.now(), 2*m.tolerance) {
		return Identity{}, fmt.Errorf("%w: body signature.token was already used with another body", ErrBadSignature)
	}
	return ev, nil
}

// tokenCache remembers the body each token came with, for a while, in a
// bounded ring: the oldest entry makes room for a new one.
type tokenCache struct {
	mu    sync.Mutex
	byTok map[string]tokenEntry
	ring  []string // insertion order; "" where free
	next  int
}

type tokenEntry struct {
	body    [sha256.Size]byte
	expires time.Time
}

func newTokenCache(size int) *tokenCache {
	return &tokenCache{byTok: make(map[string]tokenEntry), ring: make([]string, size)}
}

// claim records token with body's digest and reports true, or reports
// false when the token is remembered, unexpired, with another body.
func (c *tokenCache) claim(token string, body [sha256.Size]byte, now time.Time, keep time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byTok[token]; ok {
		if now.Before(e.expires) {
			return e.body == body
		}
		// Expired: a new claim in the token's ring slot.
		c.byTok[token] = tokenEntry{body: body, expires: now.Add(keep)}
		return true
	}
	if old := c.ring[c.next]; old != "" {
		delete(c.byTok, old)
	}
	c.ring[c.next] = token
	c.next = (c.next + 1) % len(c.ring)
	c.byTok[token] = tokenEntry{body: body, expires: now.Add(keep)}
	return true
}
