package provider

// GitHub (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries):
// X-Hub-Signature-256 is "sha256=" + hex HMAC-SHA256 of the body, keyed with
// the webhook secret as written. The legacy SHA-1 X-Hub-Signature is not
// accepted on its own: SHA-1 is not a MAC to trust, and every GitHub
// delivery carries both. There is no signed timestamp, so no tolerance.
//
// The event id is X-GitHub-Delivery and the type X-GitHub-Event. Neither
// header is signed (only the body is): a captured delivery replayed with a
// new delivery id passes the signature. GitHub gives no signed id to use
// instead; the scoped key still stops exact retries.
//
// The "ping" GitHub sends when a webhook is created is verified and
// published like any event (type "ping"): it proves the endpoint, secret
// and stream work end to end, and subscribers filter by type anyway.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/intakehq/intake/internal/hmacpool"
)

// Canonical header names (net/http's spelling of X-GitHub-*).
const (
	githubSignatureHeader = "X-Hub-Signature-256"
	githubSHA1Header      = "X-Hub-Signature"
	githubDeliveryHeader  = "X-Github-Delivery"
	githubEventHeader     = "X-Github-Event"
)

type github struct {
	keys      []*hmacpool.Key // HMAC-SHA256, one per secret
	identity  identityReader
	defaultID bool // the id is X-GitHub-Delivery, required up front
}

func newGitHub(cfg Config) (Verifier, error) {
	g := &github{keys: hmacKeys(sha256.New, cfg.Secrets), defaultID: cfg.EventID.IsZero()}
	var err error
	g.identity, err = newIdentity(cfg, identityFields{
		eventID:   Field{Header: githubDeliveryHeader},
		eventType: Field{Header: githubEventHeader},
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (g *github) Verify(d *Request) (Identity, error) {
	sig := d.Header.Get(githubSignatureHeader)
	if sig == "" {
		if d.Header.Get(githubSHA1Header) != "" {
			return Identity{}, fmt.Errorf("%w: %s (a SHA-1 %s alone is not accepted)", ErrMissingHeader, githubSignatureHeader, githubSHA1Header)
		}
		return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, githubSignatureHeader)
	}
	if g.defaultID && d.Header.Get(githubDeliveryHeader) == "" {
		return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, githubDeliveryHeader)
	}
	hexMAC, ok := strings.CutPrefix(sig, "sha256=")
	var want [sha256.Size]byte
	if !ok || len(hexMAC) != hex.EncodedLen(sha256.Size) {
		return Identity{}, fmt.Errorf("%w: %s is not sha256=<64 hex digits>", ErrBadSignature, githubSignatureHeader)
	}
	if _, err := hex.Decode(want[:], []byte(hexMAC)); err != nil {
		return Identity{}, fmt.Errorf("%w: %s is not hex", ErrBadSignature, githubSignatureHeader)
	}
	idx := firstMatch(g.keys, want[:], d.Body)
	if idx < 0 {
		return Identity{}, fmt.Errorf("%w: %s does not match", ErrBadSignature, githubSignatureHeader)
	}

	ev := Identity{SecretIndex: idx}
	body := jsonBody{raw: d.Body}
	if err := g.identity.read(d.Header, &body, &ev); err != nil {
		return Identity{}, err
	}
	return ev, nil
}
