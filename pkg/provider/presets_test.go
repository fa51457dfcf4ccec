package provider

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Paddle's vector: the example of paddle-go-sdk (example_webhook_verifier_test.go).
const (
	paddleTS        = 1710929255
	paddleSignature = `ts=1710929255;h1=6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8`
	paddleBody      = `{"data":{"id":"pri_01hsdn96k2hxjzsq5yerecdj9j","name":null,"status":"active","quantity":{"maximum":999999,"minimum":1},"tax_mode":"account_setting","product_id":"pro_01hsdn8qp7yydry3x1yeg6a9rv","unit_price":{"amount":"1000","currency_code":"USD"},"custom_data":null,"description":"testing","import_meta":null,"trial_period":null,"billing_cycle":{"interval":"month","frequency":1},"unit_price_overrides":[]},"event_id":"evt_01hsdn97563968dy0szkmgjwh3","event_type":"price.created","occurred_at":"2024-03-20T10:07:35.590857Z","notification_id":"ntf_01hsdn977e920kbgzt6r6c9rqc"}`
	paddleSecret    = `pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr`
)

// workosHeader signs as workos-go's own test helper does (mockWebhookHeader
// in pkg/webhooks/client_test.go): "t=" + unix ms + ", v1=" + hex HMAC of
// "{ms}.{body}".
func workosHeader(now time.Time, secret, body string) string {
	ms := strconv.FormatInt(now.Round(0).Unix()*1000, 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ms + "." + body))
	return "t=" + ms + ", v1=" + hex.EncodeToString(m.Sum(nil))
}

func TestPresets(t *testing.T) {
	sha1hex := func(secret, body string) string {
		m := hmac.New(sha1.New, []byte(secret))
		m.Write([]byte(body))
		return hex.EncodeToString(m.Sum(nil))
	}
	now := time.Unix(1_700_000_000, 0)
	const workosBody = `{"id":"event_01H","event":"user.created","data":{"id":"user_1"}}`
	const vercelBody = `{"id":"evt_v1","type":"deployment.created","createdAt":1700000000000,"payload":{}}`
	const intercomBody = `{"type":"notification_event","id":"notif_1","topic":"conversation.user.created","data":{}}`
	const typeformBody = `{"event_id":"01HTF","event_type":"form_response","form_response":{}}`
	const coinbaseBody = `{"id":1,"event":{"id":"24934862-d980-46cb-9402-43c81b0cdba6","type":"charge:created"}}`
	const linearBody = `{"action":"create","type":"Issue","webhookTimestamp":1699999990000}`
	for _, tt := range []struct {
		name, provider, secret, body string
		header                       http.Header
		now                          time.Time
		want                         Identity
		replayGuard                  bool // the family's unsigned-id case
	}{
		{name: "paddle: paddle-go-sdk's example", provider: "paddle", secret: paddleSecret, body: paddleBody,
			header: hdr("Paddle-Signature", paddleSignature), now: time.Unix(paddleTS+3, 0),
			want: Identity{ID: "evt_01hsdn97563968dy0szkmgjwh3", Type: "price.created"}},
		{name: "workos: workos-go's test signer", provider: "workos", secret: "secret", body: workosBody,
			header: hdr("WorkOS-Signature", workosHeader(now.Add(-time.Minute), "secret", workosBody)), now: now,
			want: Identity{ID: "event_01H", Type: "user.created"}},
		{name: "vercel: sha1 hex of the body", provider: "vercel", secret: "vsecret", body: vercelBody,
			header: hdr("x-vercel-signature", sha1hex("vsecret", vercelBody)), want: Identity{ID: "evt_v1", Type: "deployment.created"}},
		{name: "intercom: sha1= hex", provider: "intercom", secret: "client-secret", body: intercomBody,
			header: hdr("X-Hub-Signature", "sha1="+sha1hex("client-secret", intercomBody)),
			want:   Identity{ID: "notif_1", Type: "conversation.user.created"}},
		{name: "typeform: sha256= base64", provider: "typeform", secret: "tf", body: typeformBody,
			header: hdr("Typeform-Signature", "sha256="+base64.StdEncoding.EncodeToString(macOf(sha256.New, "tf", typeformBody))),
			want:   Identity{ID: "01HTF", Type: "form_response"}},
		{name: "coinbase: hex of the body", provider: "coinbase", secret: "cb", body: coinbaseBody,
			header: hdr("X-CC-Webhook-Signature", hex.EncodeToString(macOf(sha256.New, "cb", coinbaseBody))),
			want:   Identity{ID: "24934862-d980-46cb-9402-43c81b0cdba6", Type: "charge:created"}},
		// GitHub's documented vector ("It's a Secret to Everybody", "Hello, World!"),
		// which Bitbucket's scheme shares.
		{name: "bitbucket: the shared sha256= vector", provider: "bitbucket", secret: "It's a Secret to Everybody", body: "Hello, World!",
			header: hdr("X-Hub-Signature", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
				"X-Request-UUID", "9c1f7b2e-1b0a-4d6e-9f3c-3d2b1a0c9e8f", "X-Event-Key", "repo:push"),
			want: Identity{ID: "9c1f7b2e-1b0a-4d6e-9f3c-3d2b1a0c9e8f", Type: "repo:push"}, replayGuard: true},
		{name: "sentry: hex, Request-ID", provider: "sentry", secret: "sn", body: `{"action":"created"}`,
			header: hdr("Sentry-Hook-Signature", hex.EncodeToString(macOf(sha256.New, "sn", `{"action":"created"}`)),
				"Request-ID", "req-1", "Sentry-Hook-Resource", "issue"), want: Identity{ID: "req-1", Type: "issue"}, replayGuard: true},
		{name: "linear: hex, Linear-Delivery", provider: "linear", secret: "ln", body: linearBody,
			header: hdr("Linear-Signature", hex.EncodeToString(macOf(sha256.New, "ln", linearBody)),
				"Linear-Delivery", "d-1", "Linear-Event", "Issue"), want: Identity{ID: "d-1", Type: "Issue"}, replayGuard: true},
		{name: "gitlab-token: X-Gitlab-Token", provider: "gitlab-token", secret: "glt", body: `{"object_kind":"push"}`,
			header: hdr("X-Gitlab-Token", "glt", "Idempotency-Key", "ik-1", "X-Gitlab-Event", "Push Hook"),
			want:   Identity{ID: "ik-1", Type: "Push Hook"}, replayGuard: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Provider: tt.provider, Secrets: []string{"wrong-" + tt.secret, tt.secret}, Tolerance: DefaultTolerance}
			v := newTestVerifier(t, cfg)
			at := tt.now
			if at.IsZero() {
				at = now
			}
			want := tt.want
			want.SecretIndex = 1
			ev, err := v.Verify(&Request{Header: tt.header, Body: []byte(tt.body), Now: at})
			if err != nil || ev != want {
				t.Fatalf("Verify = %+v, %v; want %+v", ev, err, want)
			}
			// A token signs nothing: the body is not what it vouches for.
			if _, err := v.Verify(&Request{Header: tt.header, Body: []byte(tt.body + " "), Now: at}); (err == nil) != (tt.provider == "gitlab-token") {
				t.Fatalf("tampered body: %v", err)
			}
			r, err := Resolve(cfg)
			if err != nil || r.Provider == tt.provider {
				t.Fatalf("Resolve = %+v, %v", r.Provider, err)
			}
			if got := r.EventID.Header != ""; got != tt.replayGuard {
				t.Errorf("unsigned header id = %v, want %v", got, tt.replayGuard)
			}
		})
	}
}

func TestPresetConfig(t *testing.T) {
	if _, err := New(Config{Provider: "paddle", Secrets: []string{"s"}, Pairs: PairsConfig{Header: "X"}}); err == nil {
		t.Fatal("a preset with its family's block configured was accepted")
	}
	// The operator's identity fields win; a preset's header id opt-in does
	// not extend to a header the operator names.
	r, err := Resolve(Config{Provider: "linear", Secrets: []string{"s"}, EventID: Field{Field: "data.id"}})
	if err != nil || r.EventID != (Field{Field: "data.id"}) || r.HMAC.AllowUnsignedID {
		t.Fatalf("Resolve = %+v, %v", r, err)
	}
	if _, err := New(Config{Provider: "paddle", Secrets: []string{"s"}, EventID: Field{Header: "X-Id"}}); err == nil {
		t.Fatal("an unsigned header id on paddle was accepted")
	}
	if WeakAlgorithm(Config{Provider: "vercel"}) != "sha1" || WeakAlgorithm(Config{Provider: "paddle"}) != "" ||
		WeakAlgorithm(Config{Provider: "hmac", HMAC: HMACConfig{Algorithm: "SHA1"}}) != "sha1" {
		t.Fatal("WeakAlgorithm")
	}
}
