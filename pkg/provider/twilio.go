package provider

// Twilio (form-encoded webhooks: status callbacks, incoming messages):
// X-Twilio-Signature is base64 HMAC-SHA1, under the account's auth token,
// of the URL Twilio was given followed by every POST parameter sorted by
// name, each written name+value with no separator (a repeated name: its
// values sorted, each after the name, as twilio-node writes them), as
// Twilio's documentation and SDKs compute it. The URL is public_url
// (publicurl.go): the Host header is never read. Like twilio-go's and
// twilio-node's validators, the URL is also tried with the scheme's default
// port written when public_url has no port, or without its port when it has
// one: Twilio's back end signs either spelling ("signature generation on the
// back end is inconsistent", in both SDKs). JSON bodies, which Twilio signs
// through a bodySHA256 query parameter of the request URL, are not
// supported.
//
// SHA-1 is the only algorithm Twilio offers: the integration is reported by
// the weak-algorithm warning and metric. Names and values are concatenated
// without separators, so a captured request could be re-split into other
// parameters under the same signature; the id is the unsigned
// I-Twilio-Idempotency-Token header (stable across Twilio's retries), so the
// replay guard is on by default.

import (
	"crypto/sha1"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/intakehq/intake/internal/hmacpool"
)

type twilio struct {
	urls     []string        // public_url, then its other port spelling
	keys     []*hmacpool.Key // HMAC-SHA1, one per auth token
	identity identityReader
}

func newTwilio(cfg Config) (Verifier, error) {
	if cfg.PublicURL == "" {
		return nil, fmt.Errorf("public_url: required for provider twilio (the URL exactly as configured in Twilio; the Host header is never read)")
	}
	t := &twilio{urls: twilioURLs(cfg.PublicURL), keys: hmacKeys(sha1.New, cfg.Secrets)}
	var err error
	if t.identity, err = newIdentity(cfg, identityFields{eventID: Field{Header: "I-Twilio-Idempotency-Token"}}); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *twilio) Verify(d *Request) (Identity, error) {
	sig := d.Header.Get("X-Twilio-Signature")
	if sig == "" {
		return Identity{}, fmt.Errorf("%w: X-Twilio-Signature", ErrMissingHeader)
	}
	var want [sha1.Size + 2]byte
	if !decodeMAC(want[:], sig, sha1.Size, true) {
		return Identity{}, fmt.Errorf("%w: X-Twilio-Signature is not 20 bytes of base64", ErrBadSignature)
	}
	params, err := url.ParseQuery(string(d.Body))
	if err != nil {
		return Identity{}, fmt.Errorf("%w: the body is not form-encoded", ErrBadSignature)
	}
	idx := -1
	for _, u := range t.urls {
		if idx = firstMatch(t.keys, want[:sha1.Size], []byte(twilioSignedText(u, params))); idx >= 0 {
			break
		}
	}
	if idx < 0 {
		return Identity{}, fmt.Errorf("%w: X-Twilio-Signature does not match", ErrBadSignature)
	}
	ev := Identity{SecretIndex: idx}
	body := jsonBody{raw: d.Body}
	if err := t.identity.read(d.Header, &body, &ev); err != nil {
		return Identity{}, err
	}
	return ev, nil
}

// twilioURLs is public_url and its other spelling as Twilio's SDKs try it:
// with the scheme's default port (443, 80) written when it has no port,
// without its port when it has one. public_url is an absolute http(s) URL
// without user info (checkPublicURL), so its host ends at the first / or ?.
func twilioURLs(u string) []string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return []string{u}
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	host, tail := rest[:end], rest[end:]
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		return []string{u, scheme + "://" + host[:i] + tail}
	}
	port := "443"
	if scheme == "http" {
		port = "80"
	}
	return []string{u, scheme + "://" + host + ":" + port + tail}
}

// twilioSignedText is the URL and the sorted parameters, names and values
// concatenated.
func twilioSignedText(u string, params url.Values) string {
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(u)
	for _, k := range names {
		vs := append([]string(nil), params[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			b.WriteString(k)
			b.WriteString(v)
		}
	}
	return b.String()
}
