package provider

import (
	"fmt"
	"net/http"
	"time"
)

// Request is one webhook request as the provider sent it: its headers, the
// exact bytes of its body, and when it arrived.
type Request struct {
	Header http.Header
	Body   []byte // the exact bytes received
	Now    time.Time
}

// Identity is what a verified request says of its event: the id that
// deduplicates it, its type and account, the object it orders, or a
// handshake to answer.
type Identity struct {
	ID      string // provider's stable event id: the dedup id
	Type    string // provider's event type; "" when the provider gives none
	Account string // provider account scope when the delivery carries a verified one; "" otherwise
	// ObjectID names the business object the event is about (Stripe's
	// data.object.id, …) and ObjectVersion orders that object's events, as the
	// raw text the provider sent (a number, a timestamp). Both are "" unless
	// configured or defaulted for the provider and present in the delivery;
	// the processor uses them to refuse an older version over a newer one.
	ObjectID      string
	ObjectVersion string
	// Challenge, when non-empty, marks a verified handshake rather than an
	// event (Slack's url_verification): ingress answers it and publishes
	// nothing. ID is then empty.
	Challenge string
	// ChallengeFormat says how ingress answers the handshake: ChallengeJSON
	// (Slack's {"challenge": …}), ChallengeText, ChallengeZoom,
	// ChallengeDiscord or ChallengeOkta (handshake.go).
	ChallengeFormat string
	// ChallengeMAC is Zoom's encryptedToken: hex HMAC-SHA256 of the
	// challenge under the secret that verified the request.
	ChallengeMAC string
	// SecretIndex is the index in Config.Secrets of the secret that matched, so
	// operators can see when a rotated-out secret stops being used.
	SecretIndex int
	// RetryHints are the provider's own headers saying the delivery is a
	// retry (Slack's X-Slack-Retry-Num and -Reason), read only by that
	// provider's verifier and bounded; unused entries are zero.
	RetryHints [2]RetryHint
}

// RetryHint is one retry header kept for the delivery history.
type RetryHint struct{ Name, Value string }

// HintMap returns ev's retry hints as a map; nil when there are none.
func (ev *Identity) HintMap() map[string]string {
	var m map[string]string
	for _, h := range ev.RetryHints {
		if h.Name != "" {
			if m == nil {
				m = make(map[string]string, len(ev.RetryHints))
			}
			m[h.Name] = h.Value
		}
	}
	return m
}

// Verifier checks one delivery and extracts its identity.
type Verifier interface {
	// Verify returns the event's identity or an error wrapping one of the
	// sentinel errors (ErrMissingHeader, ErrBadSignature, ErrTimestamp,
	// ErrAccount, ErrMalformed).
	Verify(d *Request) (Identity, error)
}

// Field says where a value comes from: a request header or a JSON field of the
// body (a dotted path such as "data.object.id"). Header wins when both are set.
type Field struct {
	Header string `yaml:"header,omitempty" json:"header,omitempty"`
	Field  string `yaml:"field,omitempty" json:"field,omitempty"`
}

// IsZero reports whether no source is configured.
func (f Field) IsZero() bool { return f.Header == "" && f.Field == "" }

// HMACConfig configures the generic `hmac` provider.
type HMACConfig struct {
	// Header carrying the signature. Required for provider hmac.
	Header string `yaml:"header,omitempty"`
	// Algorithm: sha256 (default), sha512 or sha1 (for senders that offer
	// nothing else; ingress warns at start and exports
	// intake_ingress_weak_algorithm).
	Algorithm string `yaml:"algorithm,omitempty"`
	// Encoding of the signature: hex (default) or base64.
	Encoding string `yaml:"encoding,omitempty"`
	// Prefix stripped from the header value before decoding, e.g. "sha256=".
	Prefix string `yaml:"prefix,omitempty"`
	// TimestampHeader names a header carrying the send time. When set, the
	// header is required, must lie within ± tolerance of now, and Template
	// must sign it. Defaults to none (no timestamp check).
	TimestampHeader string `yaml:"timestamp_header,omitempty"`
	// TimestampFormat is the timestamp header's (or field's) format: unix
	// (seconds, the default), unix_ms or rfc3339.
	TimestampFormat string `yaml:"timestamp_format,omitempty"`
	// TimestampField names a JSON field of the body carrying the send time
	// (Linear's webhookTimestamp): a number for unix and unix_ms, a string
	// for rfc3339. It is signed with the body, read once the signature
	// verified, and must be there and lie within ± tolerance. Not with
	// TimestampHeader. Defaults to none.
	TimestampField string `yaml:"timestamp_field,omitempty"`
	// IDFormat, "uuid", says the signed {id} is a UUID, which lets the
	// template put another placeholder right beside it (Twitch's
	// "{id}{timestamp}{body}"). Defaults to any id.
	IDFormat string `yaml:"id_format,omitempty"`
	// Template is the signed content: "{body}" plus optional "{timestamp}"
	// (the timestamp header's value) and "{id}" (the event_id header's value),
	// e.g. "{timestamp}.{body}". Placeholders side by side need a fixed
	// format on the side that fixes the split (docs/providers.md). Defaults
	// to "{body}".
	Template string `yaml:"template,omitempty"`
	// AllowUnsignedID accepts an event_id.header the template does not sign
	// ({id}). Such an id can be changed by anyone who replays a captured
	// delivery, so each replay under a new id is a new event (unless the
	// replay guard stops it). Defaults to false: such a config is refused.
	AllowUnsignedID bool `yaml:"allow_unsigned_id,omitempty"`
}

// Config is the provider part of an integration's configuration.
type Config struct {
	// Provider names the signature scheme: standard, svix, stripe, github,
	// shopify, slack, hmac, pairs, token, basic, pubkey, or a preset built
	// on one of them (Presets; docs/providers.md).
	Provider string `yaml:"provider"`
	// Secrets are tried in order; any may match (rotation). At least one.
	Secrets []string `yaml:"secrets"`
	// Tolerance bounds the signed timestamp's distance from now where the
	// scheme signs one. Defaults to 5 minutes.
	Tolerance time.Duration `yaml:"tolerance,omitempty"`
	// EventID overrides where the event id comes from (required for hmac).
	EventID Field `yaml:"event_id,omitempty"`
	// EventType overrides where the event type comes from. Defaults per
	// provider (see docs/providers.md).
	EventType Field `yaml:"event_type,omitempty"`
	// ObjectID overrides where the object id comes from. Defaults: stripe
	// field data.object.id, shopify field admin_graphql_api_id, others none.
	ObjectID Field `yaml:"object_id,omitempty"`
	// ObjectVersion overrides where the object version comes from. Defaults:
	// stripe field created, shopify field updated_at, others none.
	ObjectVersion Field `yaml:"object_version,omitempty"`
	// AllowedShops (provider shopify, required) lists the shop domains whose
	// deliveries are accepted, each ending in .myshopify.com, e.g.
	// "acme.myshopify.com".
	AllowedShops []string `yaml:"allowed_shops,omitempty"`
	// HMAC configures provider hmac.
	HMAC HMACConfig `yaml:"hmac,omitempty"`
	// Pairs configures provider pairs (Stripe's header shape, parameterised).
	Pairs PairsConfig `yaml:"pairs,omitempty"`
	// Token configures providers token and basic.
	Token TokenConfig `yaml:"token,omitempty"`
	// PubKey configures provider pubkey.
	PubKey PubKeyConfig `yaml:"pubkey,omitempty"`
	// Split cuts one delivery into one event per item of an array (split.go).
	// Defaults to none: one delivery, one event.
	Split SplitConfig `yaml:"split,omitempty"`
	// PublicURL is the URL exactly as registered with the sender, for
	// templates that sign it ({url}: Square, HubSpot). The Host header is
	// never read. Defaults to none.
	PublicURL string `yaml:"public_url,omitempty"`
	// KeyURLHosts are the hosts a key may be fetched from: those a
	// certificate URL named by a delivery may point to (provider paypal:
	// defaults to PayPalCertHosts), or pubkey.key_url's (defaults to its
	// host). Ingress fetches from them (docs/security.md, egress).
	KeyURLHosts []string `yaml:"key_url_hosts,omitempty"`
	// Handshake answers a sender's endpoint check: twitch, zoom, discord
	// (POST, verified first), okta or dropbox (GET), graph (Microsoft
	// Graph's unsigned POST with ?validationToken) (handshake.go).
	// Defaults to none, or the preset's.
	Handshake string `yaml:"handshake,omitempty"`
}

// DefaultTolerance is the timestamp tolerance when Config.Tolerance is zero.
// It is also what Stripe's, Slack's and the Standard Webhooks libraries use.
const DefaultTolerance = 5 * time.Minute

// Families lists the signature schemes this build implements.
func Families() []string {
	return []string{"standard", "svix", "stripe", "github", "shopify", "slack", "mailgun", "adyen", "twilio", "paypal", "hmac", "pairs", "token", "basic", "pubkey"}
}

// Names lists every provider name this build accepts: the families, then
// the presets.
func Names() []string {
	return append(Families(), Presets()...)
}

// New builds the Verifier for cfg, validating it. Errors name the offending field.
func New(cfg Config) (Verifier, error) {
	// pubkey with key_url fetches its keys; every other scheme needs one.
	keySet := cfg.Provider == "pubkey" && cfg.PubKey.KeyURL != ""
	if len(cfg.Secrets) == 0 && !keySet {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	for i, s := range cfg.Secrets {
		if s == "" {
			return nil, fmt.Errorf("secrets[%d]: empty (is its ${ENV} variable set?)", i)
		}
	}
	if cfg.Tolerance < 0 {
		return nil, fmt.Errorf("tolerance: must not be negative")
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = DefaultTolerance
	}
	// Options of another provider are a mistake, not something to ignore:
	// a Shopify allow-list on a Stripe integration would protect nothing.
	if len(cfg.AllowedShops) > 0 && cfg.Provider != "shopify" {
		return nil, fmt.Errorf("allowed_shops: only for provider shopify")
	}
	preset := cfg.Provider
	cfg, err := resolvePreset(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkSplitIdentity(cfg); err != nil {
		return nil, err
	}
	if _, err := NewSplitter(cfg); err != nil {
		return nil, err
	}
	if err := checkHandshake(cfg); err != nil {
		return nil, err
	}
	if len(cfg.KeyURLHosts) > 0 && cfg.Provider != "paypal" && !keySet {
		return nil, fmt.Errorf("key_url_hosts: only for provider paypal, and pubkey with pubkey.key_url")
	}
	if err := checkPublicURL(cfg.PublicURL); err != nil {
		return nil, err
	}
	switch cfg.Provider {
	case "hmac", "pairs", "pubkey", "twilio":
	default:
		if cfg.PublicURL != "" {
			return nil, fmt.Errorf("public_url: only for providers twilio, hmac, pairs, pubkey and their presets (the signature covers it)")
		}
	}
	if cfg.Provider != preset {
		// A preset names its sender; an error in what it filled in is the
		// operator's override, so say which preset it was.
		v, err := newFamily(cfg)
		if err != nil {
			return nil, fmt.Errorf("%w (provider %s is %s with presets)", err, preset, cfg.Provider)
		}
		return v, nil
	}
	return newFamily(cfg)
}

// newFamily builds one of the Families from a resolved cfg.
func newFamily(cfg Config) (Verifier, error) {
	for _, o := range []struct {
		key, provider string
		set           bool
	}{
		{"hmac", "hmac", cfg.HMAC != (HMACConfig{})},
		{"pairs", "pairs", cfg.Pairs != (PairsConfig{})},
		{"token", "token or basic", cfg.Token != (TokenConfig{}) && cfg.Provider != "basic"},
		{"pubkey", "pubkey", cfg.PubKey != (PubKeyConfig{})},
	} {
		if o.set && cfg.Provider != o.key {
			return nil, fmt.Errorf("%s: only for provider %s", o.key, o.provider)
		}
	}
	switch cfg.Provider {
	case "standard":
		return newStandard(cfg)
	case "svix":
		return newSvix(cfg)
	case "stripe":
		return newStripe(cfg)
	case "github":
		return newGitHub(cfg)
	case "shopify":
		return newShopify(cfg)
	case "slack":
		return newSlack(cfg)
	case "mailgun":
		return newMailgun(cfg)
	case "adyen":
		return newAdyen(cfg)
	case "twilio":
		return newTwilio(cfg)
	case "paypal":
		return newPayPal(cfg)
	case "hmac":
		return newHMAC(cfg)
	case "pairs":
		return newPairs(cfg)
	case "token", "basic":
		return newToken(cfg)
	case "pubkey":
		return newPubKey(cfg)
	case "":
		return nil, fmt.Errorf("provider: required (one of %v)", Names())
	default:
		return nil, fmt.Errorf("provider: unknown %q (one of %v)", cfg.Provider, Names())
	}
}

// now returns d.Now, or the clock when it is zero.
func (d *Request) now() time.Time {
	if d.Now.IsZero() {
		return time.Now()
	}
	return d.Now
}
