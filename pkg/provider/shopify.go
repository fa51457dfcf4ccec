package provider

// Shopify (https://shopify.dev/docs/apps/build/webhooks/subscribe/https):
// X-Shopify-Hmac-Sha256 is base64 HMAC-SHA256 of the body, keyed with the
// app's client secret as written. There is no signed timestamp.
//
// Identity: the event id is X-Shopify-Event-Id when present, else
// X-Shopify-Webhook-Id; the type is X-Shopify-Topic; the account is
// X-Shopify-Shop-Domain, lowercased and, when allowed_shops is set, required
// to be one of them. The object id defaults to the body's
// admin_graphql_api_id ("gid://shopify/Order/…", unique across resource
// types) and the object version to X-Shopify-Triggered-At.
//
// Shopify signs only the body. Every header above, the shop domain
// included, can be changed by whoever replays a captured delivery; with one
// app secret shared by several shops, such a replay can move an event to
// another shop's account. allowed_shops narrows that to the shops you list.

import (
	"crypto/sha256"
	"fmt"
	"strings"
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

type shopify struct {
	keys      [][]byte
	allowed   map[string]bool // lowercased shop domains; nil: any
	identity  identity
	defaultID bool
}

func newShopify(cfg Config) (Verifier, error) {
	s := &shopify{keys: secretKeys(cfg.Secrets), defaultID: cfg.EventID.IsZero()}
	if len(cfg.AllowedShops) > 0 {
		s.allowed = make(map[string]bool, len(cfg.AllowedShops))
		for i, shop := range cfg.AllowedShops {
			shop = strings.ToLower(shop)
			if !validShopDomain(shop) {
				return nil, fmt.Errorf("allowed_shops[%d]: %q is not a shop domain such as acme.myshopify.com", i, cfg.AllowedShops[i])
			}
			s.allowed[shop] = true
		}
	}
	var err error
	s.identity, err = newIdentity(cfg, identityFields{
		eventType:     Field{Header: shopifyTopicHeader},
		objectID:      Field{Field: "admin_graphql_api_id"},
		objectVersion: Field{Header: shopifyTriggeredAtHeader},
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *shopify) Verify(d *Delivery) (Event, error) {
	sig := d.Header.Get(shopifyHMACHeader)
	if sig == "" {
		return Event{}, fmt.Errorf("%w: %s", ErrMissingHeader, shopifyHMACHeader)
	}
	shop := d.Header.Get(shopifyShopHeader)
	if shop == "" {
		return Event{}, fmt.Errorf("%w: %s", ErrMissingHeader, shopifyShopHeader)
	}
	var id string
	if s.defaultID {
		if id = d.Header.Get(shopifyEventIDHeader); id == "" {
			if id = d.Header.Get(shopifyWebhookIDHeader); id == "" {
				return Event{}, fmt.Errorf("%w: %s", ErrMissingHeader, shopifyWebhookIDHeader)
			}
		}
	}
	var want [sha256.Size]byte
	if !decodeFixed(want[:], sig) {
		return Event{}, fmt.Errorf("%w: %s is not base64 of a SHA-256 MAC", ErrBadSignature, shopifyHMACHeader)
	}
	idx := firstMatch(sha256.New, s.keys, want[:], d.Body)
	if idx < 0 {
		return Event{}, fmt.Errorf("%w: %s does not match", ErrBadSignature, shopifyHMACHeader)
	}

	// Checked after the signature, so that a rejection for the shop means a
	// genuine Shopify delivery from a shop nobody allowed.
	shop = strings.ToLower(shop)
	if s.allowed != nil && !s.allowed[shop] {
		return Event{}, fmt.Errorf("%w: %s is not in allowed_shops", ErrAccount, shopifyShopHeader)
	}
	if !validShopDomain(shop) {
		return Event{}, fmt.Errorf("%w: %s is not a domain", ErrMalformed, shopifyShopHeader)
	}
	ev := Event{ID: id, Account: shop, SecretIndex: idx}
	body := jsonBody{raw: d.Body}
	if err := s.identity.read(d.Header, &body, &ev); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// validShopDomain accepts a lowercase host name: letters, digits, '-' and
// '.', at most 255 bytes. It also keeps '/' out of the scoped key.
func validShopDomain(s string) bool {
	if s == "" || len(s) > 255 || s[0] == '.' || s[0] == '-' {
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
