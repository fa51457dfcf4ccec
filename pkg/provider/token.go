package provider

// Static secrets (providers token and basic): the sender puts a shared
// secret in a header as it is (GitLab's X-Gitlab-Token, Okta's and Auth0's
// Authorization) or as HTTP Basic credentials (Postmark, Adyen). Nothing is
// signed: the secret authenticates the SENDER, not the event. Whoever sees
// one request (a proxy log, a leaked header) can send any body under any id
// until the secret is rotated, and TLS is the only integrity there is. So:
//
//   - the comparison is constant time over SHA-256 digests (length and
//     content leak nothing, as hmac.Equal does for MACs);
//   - event_id is required, from a header or a body field, both unsigned;
//   - the replay guard is on by default (config.ReplayGuardDefault), so a
//     captured body resent under a fresh id is refused; a forged body is not
//     something any check here can see.
//
// token: token.header (default Authorization) carries token.prefix (e.g.
// "Bearer ") + one of the secrets. basic: Authorization carries "Basic " +
// base64("user:password"), each secret written "user:password".

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
)

// TokenConfig configures providers token and basic.
type TokenConfig struct {
	// Header carrying the token (provider token). Defaults to
	// Authorization; basic always reads Authorization.
	Header string `yaml:"header,omitempty"`
	// Prefix before the token, e.g. "Bearer " (provider token). Defaults
	// to none.
	Prefix string `yaml:"prefix,omitempty"`
}

type tokenVerifier struct {
	header   string // canonical
	prefix   string
	basic    bool
	digests  [][sha256.Size]byte // of each secret, in order
	identity identityReader
}

func newToken(cfg Config) (Verifier, error) {
	c := cfg.Token
	v := &tokenVerifier{header: "Authorization", prefix: c.Prefix, basic: cfg.Provider == "basic"}
	if v.basic {
		if c != (TokenConfig{}) {
			return nil, fmt.Errorf("token: only for provider token (basic reads Authorization: Basic …)")
		}
		for i, s := range cfg.Secrets {
			if user, _, ok := strings.Cut(s, ":"); !ok || user == "" {
				return nil, fmt.Errorf("secrets[%d]: must be user:password for provider basic", i)
			}
		}
	} else if c.Header != "" {
		if !validHeaderName(c.Header) {
			return nil, fmt.Errorf("token.header: %q is not a valid header name", c.Header)
		}
		v.header = textproto.CanonicalMIMEHeaderKey(c.Header)
	}
	for _, s := range cfg.Secrets {
		v.digests = append(v.digests, sha256.Sum256([]byte(s)))
	}
	if cfg.EventID.IsZero() && cfg.Split.IsZero() {
		return nil, fmt.Errorf("event_id: header or field required for provider %s", cfg.Provider)
	}
	var err error
	if v.identity, err = newIdentity(cfg, identityFields{}); err != nil {
		return nil, err
	}
	return v, nil
}

func (v *tokenVerifier) Verify(d *Request) (Identity, error) {
	idx, err := v.checkCredentials(d.Header)
	if err != nil {
		return Identity{}, err
	}
	ev := Identity{SecretIndex: idx}
	body := jsonBody{raw: d.Body}
	if err := v.identity.read(d.Header, &body, &ev); err != nil {
		return Identity{}, err
	}
	return ev, nil
}

// checkCredentials returns the index of the secret h carries, or an error
// wrapping ErrMissingHeader or ErrBadSignature.
func (v *tokenVerifier) checkCredentials(h http.Header) (int, error) {
	got := h.Get(v.header)
	if got == "" {
		return -1, fmt.Errorf("%w: %s", ErrMissingHeader, v.header)
	}
	var presented string
	if v.basic {
		scheme, cred, ok := strings.Cut(got, " ")
		if !ok || !strings.EqualFold(scheme, "Basic") {
			return -1, fmt.Errorf("%w: %s is not Basic credentials", ErrBadSignature, v.header)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		if err != nil {
			return -1, fmt.Errorf("%w: %s is not base64", ErrBadSignature, v.header)
		}
		presented = string(raw)
	} else {
		var ok bool
		if presented, ok = strings.CutPrefix(got, v.prefix); !ok {
			return -1, fmt.Errorf("%w: %s lacks the configured prefix", ErrBadSignature, v.header)
		}
	}
	digest := sha256.Sum256([]byte(presented))
	idx := -1
	for i := range v.digests {
		if subtle.ConstantTimeCompare(digest[:], v.digests[i][:]) == 1 {
			idx = i
			break
		}
	}
	if idx < 0 {
		return -1, fmt.Errorf("%w: %s does not match a configured secret", ErrBadSignature, v.header)
	}
	return idx, nil
}
