package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
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
	v := newTestVerifier(t, Config{Provider: "shopify", Secrets: []string{"test_secret_key"}, AllowedShops: []string{"shop1.myshopify.com"}})
	h := hdr("X-Shopify-Hmac-Sha256", want, "X-Shopify-Shop-Domain", "shop1.myshopify.com",
		"X-Shopify-Topic", "products/create", "X-Shopify-Webhook-Id", "123456789", "X-Shopify-API-Version", "2023-01")
	ev, err := v.Verify(&Request{Header: h, Body: []byte(`{"foo": "bar"}`)})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if want := (Identity{ID: "123456789", Type: "products/create", Account: "shop1.myshopify.com"}); ev != want {
		t.Fatalf("event = %+v, want %+v", ev, want)
	}
	if got := shopifySig("test_secret_key", `{"foo": "bar"}`); got != want {
		t.Fatalf("test signer = %s, want the library's %s", got, want)
	}
}

func TestShopifyVerify(t *testing.T) {
	const body = `{"id":820982911946154508,"admin_graphql_api_id":"gid://shopify/Order/820982911946154508","email":"jon@example.com","updated_at":"2023-11-14T17:10:00-05:00"}`
	good := shopifySig(shopifySecret, body)
	h := hdr("X-Shopify-Hmac-Sha256", good, "X-Shopify-Shop-Domain", "Acme.myshopify.com",
		"X-Shopify-Topic", "orders/create", "X-Shopify-Webhook-Id", "wh-1", "X-Shopify-Event-Id", "ev-1",
		"X-Shopify-Triggered-At", "2024-03-01T12:00:00.123456789Z")
	want := Identity{ID: "ev-1", Type: "orders/create", Account: "acme.myshopify.com",
		ObjectID: "gid://shopify/Order/820982911946154508", ObjectVersion: "2023-11-14T17:10:00-05:00"}
	shops := func(s ...string) func(*Config) { return func(c *Config) { c.AllowedShops = s } }
	signed := func(b string) (*string, http.Header) {
		return &b, with(h, "X-Shopify-Hmac-Sha256", shopifySig(shopifySecret, b))
	}
	now := time.Unix(1_700_000_000, 0) // 2023-11-14T22:13:20Z
	noObject := Identity{ID: "ev-1", Type: "orders/create", Account: "acme.myshopify.com"}

	xml, xmlH := signed(`<order/>`)
	noGID, noGIDH := signed(`{"shop_id":1,"updated_at":"2023-11-14T22:10:00Z"}`)
	noUpdated, noUpdatedH := signed(`{"admin_graphql_api_id":"gid://shopify/Customer/1"}`)
	future, futureH := signed(`{"admin_graphql_api_id":"gid://shopify/Order/1","updated_at":"9999-12-31T23:59:59Z"}`)
	edge, edgeH := signed(`{"admin_graphql_api_id":"gid://shopify/Order/1","updated_at":"2023-11-14T22:18:20Z"}`)
	past, pastH := signed(`{"admin_graphql_api_id":"gid://shopify/Order/1","updated_at":"2023-11-14T22:18:21Z"}`)
	dup, dupH := signed(`{"admin_graphql_api_id":"gid://shopify/Order/1","updated_at":"2023-11-14T22:10:00Z","updated_at":"9999-12-31T23:59:59Z"}`)
	arr, arrH := signed(`[{"admin_graphql_api_id":"gid://shopify/Order/1"}]`)
	str, strH := signed(`"gid://shopify/Order/1"`)

	runVerifyCases(t, Config{Provider: "shopify", Secrets: []string{shopifySecret}, AllowedShops: []string{"acme.myshopify.com"}}, body, now, []verifyCase{
		{name: "valid", header: h, want: want},
		{name: "webhook id when no event id", header: with(h, "X-Shopify-Event-Id", ""),
			want: func() Identity { w := want; w.ID = "wh-1"; return w }()},
		{name: "event id alone", header: with(h, "X-Shopify-Webhook-Id", ""), want: want},
		{name: "allowed shop (any case)", cfg: shops("other.myshopify.com", "ACME.myshopify.com"), header: h, want: want},
		{name: "shop not allowed", cfg: shops("other.myshopify.com"), header: h, wantErr: ErrAccount},
		{name: "shop checked after the signature", cfg: shops("other.myshopify.com"),
			header: with(h, "X-Shopify-Hmac-Sha256", shopifySig(shopifyOtherSecret, body)), wantErr: ErrBadSignature},
		{name: "rotated: second secret", cfg: func(c *Config) { c.Secrets = []string{shopifyOtherSecret, shopifySecret} },
			header: h, want: func() Identity { w := want; w.SecretIndex = 1; return w }()},
		{name: "wrong secret", header: with(h, "X-Shopify-Hmac-Sha256", shopifySig(shopifyOtherSecret, body)), wantErr: ErrBadSignature},
		{name: "tampered body", body: strp(strings.Replace(body, "jon", "jan", 1)), header: h, wantErr: ErrBadSignature},
		{name: "hex instead of base64", header: with(h, "X-Shopify-Hmac-Sha256", strings.Repeat("ab", 32)), wantErr: ErrBadSignature},
		{name: "unpadded base64", header: with(h, "X-Shopify-Hmac-Sha256", strings.TrimRight(good, "=")), wantErr: ErrBadSignature},
		{name: "non-canonical padding bits", header: with(h, "X-Shopify-Hmac-Sha256", flipPaddingBits(good)), wantErr: ErrBadSignature},
		{name: "missing HMAC", header: with(h, "X-Shopify-Hmac-Sha256", ""), wantErr: ErrMissingHeader, errHas: "X-Shopify-Hmac-Sha256"},
		{name: "missing shop", header: with(h, "X-Shopify-Shop-Domain", ""), wantErr: ErrMissingHeader, errHas: "X-Shopify-Shop-Domain"},
		{name: "missing both ids", header: with(with(h, "X-Shopify-Event-Id", ""), "X-Shopify-Webhook-Id", ""),
			wantErr: ErrMissingHeader, errHas: "X-Shopify-Webhook-Id"},
		{name: "shop with a slash", header: with(h, "X-Shopify-Shop-Domain", "acme.myshopify.com/x"), wantErr: ErrAccount},
		{name: "no topic, no triggered-at", header: with(with(h, "X-Shopify-Topic", ""), "X-Shopify-Triggered-At", ""),
			want: func() Identity { w := want; w.Type = ""; return w }()},
		// Issue 14: the version came from the unsigned X-Shopify-Triggered-At;
		// a replay with a far-future one froze the order.
		{name: "Triggered-At is not the version", header: with(h, "X-Shopify-Triggered-At", "9999-12-31T23:59:59Z"), want: want},
		{name: "far-future updated_at", body: future, header: futureH, wantErr: ErrObjectVersion},
		{name: "updated_at at now plus the tolerance", body: edge, header: edgeH,
			want: Identity{ID: "ev-1", Type: "orders/create", Account: "acme.myshopify.com", ObjectID: "gid://shopify/Order/1", ObjectVersion: "2023-11-14T22:18:20Z"}},
		{name: "updated_at a second past it", body: past, header: pastH, wantErr: ErrObjectVersion},
		{name: "duplicated updated_at", body: dup, header: dupH, wantErr: ErrMalformed},
		{name: "body without admin_graphql_api_id", body: noGID, header: noGIDH, want: noObject},
		{name: "object without updated_at: no ordering", body: noUpdated, header: noUpdatedH, want: noObject},
		{name: "configured version must be there", cfg: func(c *Config) { c.ObjectVersion = Field{Field: "updated_at"} },
			body: noUpdated, header: noUpdatedH,
			want: Identity{ID: "ev-1", Type: "orders/create", Account: "acme.myshopify.com", ObjectID: "gid://shopify/Customer/1"}},
		// Issue 14: the client secret also signs HS256 tokens and OAuth
		// parameters; a body that is no JSON object is no Shopify webhook.
		{name: "XML body", body: xml, header: xmlH, wantErr: ErrMalformed},
		{name: "JSON array body", body: arr, header: arrH, wantErr: ErrMalformed},
		{name: "JSON string body", body: str, header: strH, wantErr: ErrMalformed},
		{name: "object id configured to the numeric id", cfg: func(c *Config) { c.ObjectID = Field{Field: "id"} },
			header: h, want: func() Identity { w := want; w.ObjectID = "820982911946154508"; return w }()},
	})
}

// The attack of issue 14: the app's client secret signs a session token
// (HS256 JWT) that any merchant's browser sees; its signed text plus its
// MAC, posted as a webhook, verified as shop/redact for a victim shop under
// an id of the attacker's choosing.
func TestShopifyRefusesTokenForgery(t *testing.T) {
	b64 := base64.RawURLEncoding.EncodeToString
	signedText := b64([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." +
		b64([]byte(`{"iss":"https://acme.myshopify.com/admin","dest":"https://acme.myshopify.com","aud":"client-id","sub":"42","exp":1700000060,"nbf":1700000000,"iat":1700000000,"jti":"x","sid":"y"}`))
	jwtMAC := hmac.New(sha256.New, []byte(shopifySecret))
	jwtMAC.Write([]byte(signedText))
	token := signedText + "." + b64(jwtMAC.Sum(nil))

	// What the attacker sends: the token's signed text as the body, its
	// MAC (re-encoded as standard base64) as the webhook signature.
	mac, err := base64.RawURLEncoding.DecodeString(token[strings.LastIndexByte(token, '.')+1:])
	if err != nil {
		t.Fatal(err)
	}
	oauth := "code=0907a61c0c8d55e99db179b68161bc00&shop=acme.myshopify.com&state=0.6784241404160823&timestamp=1337178173"
	for name, forged := range map[string]struct {
		body string
		mac  string
	}{
		"session token": {signedText, base64.StdEncoding.EncodeToString(mac)},
		"OAuth hmac":    {oauth, shopifySig(shopifySecret, oauth)},
	} {
		v := newTestVerifier(t, Config{Provider: "shopify", Secrets: []string{shopifySecret}, AllowedShops: []string{"acme.myshopify.com"}})
		_, err := v.Verify(&Request{Header: hdr("X-Shopify-Hmac-Sha256", forged.mac, "X-Shopify-Shop-Domain", "acme.myshopify.com",
			"X-Shopify-Topic", "shop/redact", "X-Shopify-Event-Id", "chosen-by-the-attacker"), Body: []byte(forged.body), Now: time.Unix(1_700_000_000, 0)})
		if err == nil || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: forged webhook err = %v, want a refusal (ErrMalformed)", name, err)
		}
	}
}

// A far-future version must not freeze the object: the forged attempt is
// refused, and the genuine update after it carries its own, later-than-
// before version (the processor's guard compares versions, see the
// processor test of the same name).
func TestShopifyGenuineUpdateAfterForgedFutureVersion(t *testing.T) {
	v := newTestVerifier(t, Config{Provider: "shopify", Secrets: []string{shopifySecret}, AllowedShops: []string{"acme.myshopify.com"}})
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	send := func(id, triggered, body string) (Identity, error) {
		return v.Verify(&Request{Header: hdr("X-Shopify-Hmac-Sha256", shopifySig(shopifySecret, body), "X-Shopify-Shop-Domain", "acme.myshopify.com",
			"X-Shopify-Topic", "orders/updated", "X-Shopify-Event-Id", id, "X-Shopify-Triggered-At", triggered), Body: []byte(body), Now: now})
	}
	first := `{"admin_graphql_api_id":"gid://shopify/Order/7","updated_at":"2024-03-01T11:00:00Z"}`
	// A captured delivery replayed under a new id with a far-future
	// Triggered-At: its version is still the signed updated_at.
	replayed, err := send("fresh-id", "9999-12-31T23:59:59Z", first)
	if err != nil {
		t.Fatal(err)
	}
	second := `{"admin_graphql_api_id":"gid://shopify/Order/7","updated_at":"2024-03-01T11:59:00Z"}`
	genuine, err := send("ev-2", "2024-03-01T11:59:01Z", second)
	if err != nil {
		t.Fatal(err)
	}
	rv, err1 := time.Parse(time.RFC3339, replayed.ObjectVersion)
	gv, err2 := time.Parse(time.RFC3339, genuine.ObjectVersion)
	if err1 != nil || err2 != nil || !gv.After(rv) {
		t.Fatalf("genuine version %q is not after the replayed %q", genuine.ObjectVersion, replayed.ObjectVersion)
	}
}

func TestShopifyAllowedShopsConfig(t *testing.T) {
	for _, bad := range []string{"", "https://acme.myshopify.com", "acme.myshopify.com/", "-acme.myshopify.com", "acme shop",
		"acme.example.com", "myshopify.com", ".myshopify.com", "acme.myshopify.com.evil.io", "a..myshopify.com"} {
		_, err := New(Config{Provider: "shopify", Secrets: []string{"s"}, AllowedShops: []string{"ok.myshopify.com", bad}})
		if err == nil || !strings.Contains(err.Error(), "allowed_shops[1]") {
			t.Errorf("allowed shop %q: err = %v, want allowed_shops[1]", bad, err)
		}
	}
	if _, err := New(Config{Provider: "shopify", Secrets: []string{"s"}}); err == nil || !strings.Contains(err.Error(), "allowed_shops: required") {
		t.Errorf("no allowed_shops: err = %v", err)
	}
	if _, err := New(Config{Provider: "shopify", Secrets: []string{"s"}, AllowedShops: []string{"a.myshopify.com"},
		ObjectVersion: Field{Header: "X-Shopify-Triggered-At"}}); err == nil || !strings.Contains(err.Error(), "object_version.header") {
		t.Errorf("unsigned version header: err = %v", err)
	}
	if _, err := New(Config{Provider: "stripe", Secrets: []string{"s"}, AllowedShops: []string{"a.myshopify.com"}}); err == nil ||
		!strings.Contains(err.Error(), "allowed_shops") {
		t.Errorf("allowed_shops on stripe: err = %v", err)
	}
}
