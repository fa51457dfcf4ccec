package provider

// Shopify (https://shopify.dev/docs/apps/build/webhooks/subscribe/https):
// X-Shopify-Hmac-Sha256 is base64 HMAC-SHA256 of the body, keyed with the
// app's client secret as written. There is no signed timestamp.
//
// Identity: the event id is X-Shopify-Event-Id when present, else
// X-Shopify-Webhook-Id; the type is X-Shopify-Topic; the account is
// X-Shopify-Shop-Domain, lowercased, required to end in .myshopify.com and
// to be one of allowed_shops (required). The object id defaults to the
// body's admin_graphql_api_id ("gid://shopify/Order/…", unique across
// resource types) and the object version to the body's updated_at.
//
// Shopify signs only the body, and the app's client secret also signs
// browser-visible HS256 tokens (session, ID and checkout tokens) and OAuth
// hmac parameters. Their signed text is never a JSON object, so a body that
// is not one is refused (400): a token and its MAC do not pass as a webhook.
// Every header above, the shop domain included, can be changed by whoever
// replays a captured delivery; allowed_shops narrows the shop to the ones
// you list, and the object version comes from the signed body, not from the
// unsigned X-Shopify-Triggered-At (a replay with a far-future Triggered-At
// would have frozen the object: every genuine update after it stale). A
// version later than now plus the tolerance is refused (400).

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"github.com/intakehq/intake/internal/hmacpool"
)

// Canonical header names.
const (
	shopifyHMACHeader        = "X-Shopify-Hmac-Sha256"
	shopifyShopHeader        = "X-Shopify-Shop-Domain"
	shopifyEventIDHeader     = "X-Shopify-Event-Id"
	shopifyWebhookIDHeader   = "X-Shopify-Webhook-Id"
	shopifyTopicHeader       = "X-Shopify-Topic"
	shopifyTriggeredAtHeader = "X-Shopify-Triggered-At"
)

// shopDomainSuffix ends every shop's own domain; a custom domain never
// appears in X-Shopify-Shop-Domain.
const shopDomainSuffix = ".myshopify.com"

type shopify struct {
	keys      []*hmacpool.Key // HMAC-SHA256, one per secret
	allowed   map[string]bool // lowercased shop domains
	identity  identityReader
	defaultID bool
	// defaultObject: object id and version are the defaults, so an object
	// without updated_at arrives without ordering instead of being refused.
	defaultObject bool
	tolerance     time.Duration
}

func newShopify(cfg Config) (Verifier, error) {
	s := &shopify{keys: hmacKeys(sha256.New, cfg.Secrets), defaultID: cfg.EventID.IsZero(),
		defaultObject: cfg.ObjectID.IsZero() && cfg.ObjectVersion.IsZero(), tolerance: cfg.Tolerance}
	if len(cfg.AllowedShops) == 0 {
		return nil, fmt.Errorf("allowed_shops: required for provider shopify (the shops whose deliveries are accepted, e.g. [acme.myshopify.com])")
	}
	s.allowed = make(map[string]bool, len(cfg.AllowedShops))
	for i, shop := range cfg.AllowedShops {
		shop = strings.ToLower(shop)
		if !validShopDomain(shop) {
			return nil, fmt.Errorf("allowed_shops[%d]: %q is not a shop domain such as acme%s", i, cfg.AllowedShops[i], shopDomainSuffix)
		}
		s.allowed[shop] = true
	}
	if cfg.ObjectVersion.Header != "" {
		return nil, fmt.Errorf("object_version.header: Shopify does not sign headers; use a body field such as updated_at")
	}
	var err error
	s.identity, err = newIdentity(cfg, identityFields{
		eventType:     Field{Header: shopifyTopicHeader},
		objectID:      Field{Field: "admin_graphql_api_id"},
		objectVersion: Field{Field: "updated_at"},
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *shopify) Verify(d *Request) (Identity, error) {
	sig := d.Header.Get(shopifyHMACHeader)
	if sig == "" {
		return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, shopifyHMACHeader)
	}
	shop := d.Header.Get(shopifyShopHeader)
	if shop == "" {
		return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, shopifyShopHeader)
	}
	var id string
	if s.defaultID {
		if id = d.Header.Get(shopifyEventIDHeader); id == "" {
			if id = d.Header.Get(shopifyWebhookIDHeader); id == "" {
				return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, shopifyWebhookIDHeader)
			}
		}
	}
	var want [sha256.Size]byte
	if !decodeFixed(want[:], sig) {
		return Identity{}, fmt.Errorf("%w: %s is not base64 of a SHA-256 MAC", ErrBadSignature, shopifyHMACHeader)
	}
	idx := firstMatch(s.keys, want[:], d.Body)
	if idx < 0 {
		return Identity{}, fmt.Errorf("%w: %s does not match", ErrBadSignature, shopifyHMACHeader)
	}

	// Checked after the signature, so that a rejection for the shop means a
	// genuine Shopify delivery from a shop nobody allowed.
	shop = strings.ToLower(shop)
	if !s.allowed[shop] {
		return Identity{}, fmt.Errorf("%w: %s is not in allowed_shops", ErrAccount, shopifyShopHeader)
	}
	body := jsonBody{raw: d.Body}
	if !body.isObject() {
		// The same secret signs session tokens and OAuth parameters; no
		// webhook of Shopify's is anything but a JSON object.
		return Identity{}, fmt.Errorf("%w: a Shopify webhook body is a JSON object", ErrMalformed)
	}
	ev := Identity{ID: id, Account: shop, SecretIndex: idx}
	if err := s.identity.read(d.Header, &body, &ev); err != nil {
		return Identity{}, err
	}
	if s.defaultObject && (ev.ObjectID == "" || ev.ObjectVersion == "") {
		// A resource without admin_graphql_api_id or updated_at (shop/redact,
		// …) arrives without ordering rather than being refused.
		ev.ObjectID, ev.ObjectVersion = "", ""
	}
	if err := checkVersionNotFuture(ev.ObjectVersion, d.now(), s.tolerance); err != nil {
		return Identity{}, err
	}
	return ev, nil
}

// checkVersionNotFuture refuses an RFC 3339 object version later than now
// plus tolerance: the processor keeps the highest version it applied, so
// one far-future version would make every later genuine update stale.
// Integer versions (counters) and unreadable ones pass; ingress refuses
// the unreadable.
func checkVersionNotFuture(version string, now time.Time, tolerance time.Duration) error {
	if version == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, version)
	if err != nil {
		return nil
	}
	if t.After(now.Add(tolerance)) {
		return fmt.Errorf("%w: later than now plus the tolerance", ErrObjectVersion)
	}
	return nil
}

// validShopDomain accepts a lowercase host name ending in .myshopify.com:
// letters, digits, '-' and '.', at most 255 bytes. It also keeps '/' out of
// the scoped key.
func validShopDomain(s string) bool {
	if len(s) <= len(shopDomainSuffix) || len(s) > 255 || s[0] == '.' || s[0] == '-' ||
		!strings.HasSuffix(s, shopDomainSuffix) || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
