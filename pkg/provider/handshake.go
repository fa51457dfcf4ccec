package provider

// Handshakes (handshake: twitch | zoom | discord | okta | dropbox | graph):
// a sender proves the endpoint before it delivers, and expects an answer
// built from what it sent. None is an event: a handshake never reserves an
// event id and never enters JetStream. The answers are built from verified
// fields only, or, for the checks that carry no signature at all (Dropbox's
// GET, Microsoft Graph's POST), from a challenge bounded to a token charset:
//
//   - twitch (POST, signed): Twitch-Eventsub-Message-Type
//     webhook_callback_verification; answered with the body's challenge as
//     text/plain.
//   - zoom (POST, signed): event endpoint.url_validation; answered
//     {"plainToken": p, "encryptedToken": hex(HMAC-SHA256(secret, p))} with
//     the secret that verified the request.
//   - discord (POST, signed): an interaction of type 1 (PING); answered
//     {"type":1}.
//   - okta (GET): X-Okta-Verification-Challenge, answered
//     {"verification": …}, only with the integration's token (provider
//     token or basic) in the request: Okta sends the configured
//     Authorization header on its verification request too.
//   - dropbox (GET): ?challenge=…, echoed as text/plain. Dropbox signs
//     nothing on this request; the echo is the protocol, so it is bounded
//     and limited to a token charset and answered with nosniff.
//   - graph (POST with ?validationToken=…, Microsoft Graph's subscription
//     validation): the URL-decoded token echoed as text/plain. Graph signs
//     nothing and sends no credential here, and documents the token as
//     opaque (today "Validation: Testing client application reachability
//     for subscription Request-Id: <uuid>"), so the charset adds space and
//     ':' and the bound is maxGraphToken; anything else is 400 and nothing
//     is echoed. Any family may carry it: the check reads none of the
//     family's input, and a POST without validationToken is a delivery.
//
// A POST handshake is recognised inside identity reading, which every
// family runs only after its signature verified: an unsigned or forged
// handshake is refused like any delivery.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
)

// Handshake kinds.
const (
	HandshakeTwitch  = "twitch"
	HandshakeZoom    = "zoom"
	HandshakeDiscord = "discord"
	HandshakeOkta    = "okta"
	HandshakeDropbox = "dropbox"
	HandshakeGraph   = "graph"
)

// Answer formats of a verified handshake (Identity.ChallengeFormat).
const (
	ChallengeJSON    = ""        // {"challenge": …} (Slack)
	ChallengeText    = "text"    // the challenge as text/plain (Twitch, Dropbox, Graph)
	ChallengeZoom    = "zoom"    // {"plainToken": …, "encryptedToken": …}
	ChallengeDiscord = "discord" // {"type":1}
	ChallengeOkta    = "okta"    // {"verification": …}
)

// handshakeFamilies are the families each kind may be configured on; nil:
// any family.
var handshakeFamilies = map[string][]string{
	HandshakeTwitch:  {"hmac"},
	HandshakeZoom:    {"hmac"},
	HandshakeDiscord: {"pubkey"},
	HandshakeOkta:    {"token", "basic"},
	HandshakeDropbox: {"hmac"},
	HandshakeGraph:   nil,
}

// maxHandshakeToken bounds an echoed challenge; Twitch's, Zoom's, Okta's
// and Dropbox's are tens of characters.
const maxHandshakeToken = 256

// maxGraphToken bounds Microsoft Graph's validationToken: about 110
// characters today, room for the opaque token to grow.
const maxGraphToken = 512

// validToken accepts 1 to maxHandshakeToken characters of letters,
// digits and - _ . ~ + / =: what the senders' random challenges are made
// of (base64, base64url, hex, UUIDs, dashed words), and nothing that
// could be markup or a header.
func validToken(s string) bool {
	if s == "" || len(s) > maxHandshakeToken {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenByte(s[i]) {
			return false
		}
	}
	return true
}

func tokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '~' || c == '+' || c == '/' || c == '='
}

// validGraphToken accepts 1 to maxGraphToken characters of validToken's
// charset, space and ':' (Graph's "Validation: Testing client …
// Request-Id: <uuid>"): still nothing that could be markup or a header.
func validGraphToken(s string) bool {
	if s == "" || len(s) > maxGraphToken {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != ' ' && c != ':' && !tokenByte(c) {
			return false
		}
	}
	return true
}

// checkHandshake validates cfg.Handshake for the resolved family.
func checkHandshake(cfg Config) error {
	if cfg.Handshake == "" {
		return nil
	}
	fams, ok := handshakeFamilies[cfg.Handshake]
	if !ok {
		return fmt.Errorf("handshake: unknown %q (twitch, zoom, discord, okta, dropbox or graph)", cfg.Handshake)
	}
	if fams != nil && !slices.Contains(fams, cfg.Provider) {
		return fmt.Errorf("handshake: %s is for provider %v, not %s", cfg.Handshake, fams, cfg.Provider)
	}
	return nil
}

// postHandshake recognises a verified POST handshake (identity.read calls
// it after the signature verified). keys are the HMAC keys, for Zoom.
type postHandshake struct {
	kind string
	keys [][]byte
}

// detect fills ev's challenge and reports true when the delivery is a
// handshake; a handshake without a usable token is malformed.
func (p *postHandshake) detect(h http.Header, body *jsonBody, ev *Identity) (bool, error) {
	switch p.kind {
	case HandshakeTwitch:
		if h.Get("Twitch-Eventsub-Message-Type") != "webhook_callback_verification" {
			return false, nil
		}
		c, err := body.field("challenge")
		if err != nil || !validToken(c) {
			return true, fmt.Errorf("%w: webhook_callback_verification without a usable challenge", ErrMalformed)
		}
		ev.Challenge, ev.ChallengeFormat = c, ChallengeText
		ev.Type, _ = body.field("subscription.type")
		return true, checkType(ev.Type)
	case HandshakeZoom:
		if e, err := body.field("event"); err != nil || e != "endpoint.url_validation" {
			return false, nil
		}
		c, err := body.field("payload.plainToken")
		if err != nil || !validToken(c) {
			return true, fmt.Errorf("%w: endpoint.url_validation without a usable plainToken", ErrMalformed)
		}
		m := hmac.New(sha256.New, p.keys[ev.SecretIndex])
		m.Write([]byte(c))
		ev.Challenge, ev.ChallengeFormat, ev.ChallengeMAC = c, ChallengeZoom, hex.EncodeToString(m.Sum(nil))
		ev.Type = "endpoint.url_validation"
		return true, nil
	case HandshakeDiscord:
		if t, err := body.field("type"); err != nil || t != "1" {
			return false, nil
		}
		ev.Challenge, ev.ChallengeFormat, ev.Type = "1", ChallengeDiscord, "PING"
		return true, nil
	}
	return false, nil
}

// credentialChecker is a verifier that can check a request's credentials
// without a body (token, basic): Okta's verification GET.
type credentialChecker interface {
	checkCredentials(h http.Header) (int, error)
}

// Handshaker answers the handshakes that come before any signature check:
// the GET handshakes (okta, dropbox) and Microsoft Graph's unsigned POST.
type Handshaker struct {
	kind  string
	creds credentialChecker // okta: the token check
}

// NewHandshaker returns cfg's GET or unsigned POST handshake, or nil when
// cfg configures none (a signed POST handshake is the verifier's: see New).
func NewHandshaker(cfg Config) (*Handshaker, error) {
	r, err := resolvePreset(cfg)
	if err != nil {
		return nil, err
	}
	switch r.Handshake {
	case HandshakeOkta, HandshakeDropbox, HandshakeGraph:
	default:
		return nil, nil
	}
	h := &Handshaker{kind: r.Handshake}
	if r.Handshake == HandshakeOkta {
		v, err := New(cfg)
		if err != nil {
			return nil, err
		}
		c, ok := v.(credentialChecker)
		if !ok {
			return nil, fmt.Errorf("handshake: okta needs provider token or basic")
		}
		h.creds = c
	}
	return h, nil
}

// Method is the HTTP method the sender checks the endpoint with: GET for
// okta and dropbox, POST for graph.
func (h *Handshaker) Method() string {
	if h.kind == HandshakeGraph {
		return http.MethodPost
	}
	return http.MethodGet
}

// ClaimsPOST reports whether a POST with this raw query is the handshake
// rather than a delivery (graph: it carries validationToken). It is false
// for the GET handshakes.
func (h *Handshaker) ClaimsPOST(rawQuery string) bool {
	if h.kind != HandshakeGraph || rawQuery == "" {
		return false
	}
	q, _ := url.ParseQuery(rawQuery) // what parses, as Answer will read it
	return q.Has("validationToken")
}

// Answer answers the handshake: the identity of a verified handshake
// (Challenge and ChallengeFormat set), or an error wrapping ErrMissingHeader,
// ErrBadSignature (okta's token) or ErrMalformed (no usable challenge).
func (h *Handshaker) Answer(header http.Header, query url.Values) (Identity, error) {
	switch h.kind {
	case HandshakeOkta:
		idx, err := h.creds.checkCredentials(header)
		if err != nil {
			return Identity{}, err
		}
		c := header.Get("X-Okta-Verification-Challenge")
		if c == "" {
			return Identity{}, fmt.Errorf("%w: X-Okta-Verification-Challenge", ErrMissingHeader)
		}
		if !validToken(c) {
			return Identity{}, fmt.Errorf("%w: X-Okta-Verification-Challenge is no usable challenge", ErrMalformed)
		}
		return Identity{Challenge: c, ChallengeFormat: ChallengeOkta, SecretIndex: idx}, nil
	case HandshakeGraph:
		vs := query["validationToken"]
		if len(vs) != 1 || !validGraphToken(vs[0]) {
			return Identity{}, fmt.Errorf("%w: one usable validationToken parameter expected", ErrMalformed)
		}
		return Identity{Challenge: vs[0], ChallengeFormat: ChallengeText}, nil
	default: // dropbox
		vs := query["challenge"]
		if len(vs) != 1 || !validToken(vs[0]) {
			return Identity{}, fmt.Errorf("%w: one usable challenge parameter expected", ErrMalformed)
		}
		return Identity{Challenge: vs[0], ChallengeFormat: ChallengeText}, nil
	}
}
