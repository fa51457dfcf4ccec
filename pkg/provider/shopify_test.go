package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

const (
	shopifySecret      = "shpss_shopify_client_secret_1"
	shopifyOtherSecret = "shpss_shopify_client_secret_2"
)

func shopifySig(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// The vector from Shopify's own library tests (shopify-app-js,
// packages/apps/shopify-api/lib/webhooks/__tests__/validate.test.ts): secret
// "test_secret_key", body `{"foo": "bar"}`.
func TestShopifyLibraryVector(t *testing.T) {
	const want = "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g="
	v := newTestVerifier(t, Config{Provider: "shopify", Secrets: []string{"test_secret_key"}})
	h := hdr("X-Shopify-Hmac-Sha256", want, "X-Shopify-Shop-Domain", "shop1.myshopify.io",
		"X-Shopify-Topic", "products/create", "X-Shopify-Webhook-Id", "123456789", "X-Shopify-API-Version", "2023-01")
	ev, err := v.Verify(&Delivery{Header: h, Body: []byte(`{"foo": "bar"}`)})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if want := (Event{ID: "123456789", Type: "products/create", Account: "shop1.myshopify.io"}); ev != want {
		t.Fatalf("event = %+v, want %+v", ev, want)
	}
	if got := shopifySig("test_secret_key", `{"foo": "bar"}`); got != want {
		t.Fatalf("test signer = %s, want the library's %s", got, want)
	}
}

func TestShopifyVerify(t *testing.T) {
	const body = `{"id":820982911946154508,"admin_graphql_api_id":"gid://shopify/Order/820982911946154508","email":"jon@example.com"}`
	good := shopifySig(shopifySecret, body)
	h := hdr("X-Shopify-Hmac-Sha256", good, "X-Shopify-Shop-Domain", "Acme.myshopify.com",
		"X-Shopify-Topic", "orders/create", "X-Shopify-Webhook-Id", "wh-1", "X-Shopify-Event-Id", "ev-1",
		"X-Shopify-Triggered-At", "2024-03-01T12:00:00.123456789Z")
	want := Event{ID: "ev-1", Type: "orders/create", Account: "acme.myshopify.com",
		ObjectID: "gid://shopify/Order/820982911946154508", ObjectVersion: "2024-03-01T12:00:00.123456789Z"}
	shops := func(s ...string) func(*Config) { return func(c *Config) { c.AllowedShops = s } }

	runVerifyCases(t, Config{Provider: "shopify", Secrets: []string{shopifySecret}}, body, time.Unix(1_700_000_000, 0), []verifyCase{
		{name: "valid", header: h, want: want},
		{name: "webhook id when no event id", header: with(h, "X-Shopify-Event-Id", ""),
			want: func() Event { w := want; w.ID = "wh-1"; return w }()},
		{name: "event id alone", header: with(h, "X-Shopify-Webhook-Id", ""), want: want},
		{name: "allowed shop (any case)", cfg: shops("other.myshopify.com", "ACME.myshopify.com"), header: h, want: want},
		{name: "shop not allowed", cfg: shops("other.myshopify.com"), header: h, wantErr: ErrAccount},
		{name: "shop checked after the signature", cfg: shops("other.myshopify.com"),
			header: with(h, "X-Shopify-Hmac-Sha256", shopifySig(shopifyOtherSecret, body)), wantErr: ErrBadSignature},
		{name: "rotated: second secret", cfg: func(c *Config) { c.Secrets = []string{shopifyOtherSecret, shopifySecret} },
			header: h, want: func() Event { w := want; w.SecretIndex = 1; return w }()},
		{name: "wrong secret", header: with(h, "X-Shopify-Hmac-Sha256", shopifySig(shopifyOtherSecret, body)), wantErr: ErrBadSignature},
		{name: "tampered body", body: strp(strings.Replace(body, "jon", "jan", 1)), header: h, wantErr: ErrBadSignature},
		{name: "hex instead of base64", header: with(h, "X-Shopify-Hmac-Sha256", strings.Repeat("ab", 32)), wantErr: ErrBadSignature},
		{name: "unpadded base64", header: with(h, "X-Shopify-Hmac-Sha256", strings.TrimRight(good, "=")), wantErr: ErrBadSignature},
		{name: "non-canonical padding bits", header: with(h, "X-Shopify-Hmac-Sha256", flipPaddingBits(good)), wantErr: ErrBadSignature},
		{name: "missing HMAC", header: with(h, "X-Shopify-Hmac-Sha256", ""), wantErr: ErrMissingHeader, errHas: "X-Shopify-Hmac-Sha256"},
		{name: "missing shop", header: with(h, "X-Shopify-Shop-Domain", ""), wantErr: ErrMissingHeader, errHas: "X-Shopify-Shop-Domain"},
		{name: "missing both ids", header: with(with(h, "X-Shopify-Event-Id", ""), "X-Shopify-Webhook-Id", ""),
			wantErr: ErrMissingHeader, errHas: "X-Shopify-Webhook-Id"},
		{name: "shop with a slash", header: with(h, "X-Shopify-Shop-Domain", "acme.myshopify.com/x"), wantErr: ErrMalformed},
		{name: "no topic, no triggered-at", header: with(with(h, "X-Shopify-Topic", ""), "X-Shopify-Triggered-At", ""),
			want: Event{ID: "ev-1", Account: "acme.myshopify.com", ObjectID: want.ObjectID}},
		{name: "body without admin_graphql_api_id", body: strp(`{"shop_id":1}`),
			header: with(h, "X-Shopify-Hmac-Sha256", shopifySig(shopifySecret, `{"shop_id":1}`)),
			want:   Event{ID: "ev-1", Type: "orders/create", Account: "acme.myshopify.com", ObjectVersion: want.ObjectVersion}},
		{name: "XML body: defaults are lenient", body: strp(`<order/>`),
			header: with(h, "X-Shopify-Hmac-Sha256", shopifySig(shopifySecret, `<order/>`)),
			want:   Event{ID: "ev-1", Type: "orders/create", Account: "acme.myshopify.com", ObjectVersion: want.ObjectVersion}},
		{name: "configured object id on XML body", cfg: func(c *Config) { c.ObjectID = Field{Field: "id"} }, body: strp(`<order/>`),
			header: with(h, "X-Shopify-Hmac-Sha256", shopifySig(shopifySecret, `<order/>`)), wantErr: ErrMalformed},
		{name: "object id configured to the numeric id", cfg: func(c *Config) { c.ObjectID = Field{Field: "id"} },
			header: h, want: func() Event { w := want; w.ObjectID = "820982911946154508"; return w }()},
	})
}

func TestShopifyAllowedShopsConfig(t *testing.T) {
	for _, bad := range []string{"", "https://acme.myshopify.com", "acme.myshopify.com/", "-acme.myshopify.com", "acme shop"} {
		_, err := New(Config{Provider: "shopify", Secrets: []string{"s"}, AllowedShops: []string{"ok.myshopify.com", bad}})
		if err == nil || !strings.Contains(err.Error(), "allowed_shops[1]") {
			t.Errorf("allowed shop %q: err = %v, want allowed_shops[1]", bad, err)
		}
	}
	if _, err := New(Config{Provider: "stripe", Secrets: []string{"s"}, AllowedShops: []string{"a.myshopify.com"}}); err == nil ||
		!strings.Contains(err.Error(), "allowed_shops") {
		t.Errorf("allowed_shops on stripe: err = %v", err)
	}
}
