package provider

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// signConfigs has one configuration per provider, as `intake send` would see it.
func signConfigs() map[string]Config {
	return map[string]Config{
		"standard":    {Provider: "standard", Secrets: []string{whsec(keyC), whsec(keyA)}},
		"standard-ed": {Provider: "standard", Secrets: []string{whsk}},
		"svix":        {Provider: "svix", Secrets: []string{whsec(keyC), whsec(keyA)}},
		"stripe":      {Provider: "stripe", Secrets: []string{stripeOtherSecret, stripeSecret}},
		"github":      {Provider: "github", Secrets: []string{githubOtherSecret, githubSecret}},
		"shopify":     {Provider: "shopify", Secrets: []string{shopifyOtherSecret, shopifySecret}, AllowedShops: []string{"acme.myshopify.com"}},
		"slack":       {Provider: "slack", Secrets: []string{slackOtherSecret, slackSecret}},
		"hmac":        {Provider: "hmac", Secrets: []string{hmacOtherSecret, hmacSecret}, HMAC: HMACConfig{Header: "X-Sig", Prefix: "sha256=", AllowUnsignedID: true}, EventID: Field{Header: "X-Event-Id"}, EventType: Field{Field: "type"}},
		"hmac-nested": {Provider: "hmac", Secrets: []string{hmacSecret}, HMAC: HMACConfig{Header: "X-Sig", Algorithm: "sha512", Encoding: "base64", TimestampHeader: "X-Ts", Template: "{id}:{timestamp}:{body}"}, EventID: Field{Header: "X-Event-Id", Field: "data.ref"}},
		"hmac-field":  {Provider: "hmac", Secrets: []string{hmacSecret}, HMAC: HMACConfig{Header: "X-Sig"}, EventID: Field{Field: "meta.event.id"}, EventType: Field{Field: "type"}},
	}
}

// Sign and SampleBody are the sending side of every scheme: what they
// produce must verify, with the id and type they were given.
func TestSignRoundTrip(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for name, cfg := range signConfigs() {
		t.Run(name, func(t *testing.T) {
			verifyCfg := cfg
			idx := len(cfg.Secrets) - 1
			if name == "standard-ed" {
				verifyCfg.Secrets = []string{whpk} // the receiver holds the public key
				idx = 0
			}
			v := newTestVerifier(t, verifyCfg)
			body := SampleBody(cfg, "evt_round", "thing.happened")
			h, err := SignMessage(cfg, len(cfg.Secrets)-1, Message{ID: "evt_round", Type: "thing.happened", Body: body, Time: now})
			if err != nil {
				t.Fatal(err)
			}
			ev, err := v.Verify(&Request{Header: h, Body: body, Now: now.Add(time.Second)})
			if err != nil {
				t.Fatalf("Verify: %v\nheaders %v\nbody %s", err, h, body)
			}
			wantType := "thing.happened"
			if name == "hmac-nested" {
				wantType = "" // no event_type configured
			}
			if ev.ID != "evt_round" || ev.Type != wantType || ev.SecretIndex != idx {
				t.Fatalf("event = %+v, want id evt_round, type %q, secret %d", ev, wantType, idx)
			}
			// Signed by the other secret where there is one: rotation.
			if idx > 0 {
				h0, err := SignMessage(cfg, 0, Message{ID: "evt_round", Type: "thing.happened", Body: body, Time: now})
				if err != nil {
					t.Fatal(err)
				}
				if ev, err := v.Verify(&Request{Header: h0, Body: body, Now: now}); err != nil || ev.SecretIndex != 0 {
					t.Fatalf("signed with secrets[0]: %+v, %v", ev, err)
				}
			}
			// And the same body with another byte does not verify.
			if _, err := v.Verify(&Request{Header: h, Body: append(append([]byte(nil), body...), ' '), Now: now}); err == nil {
				t.Fatal("tampered body verified")
			}
		})
	}
}

func TestSampleBodyIsDeterministic(t *testing.T) {
	for name, cfg := range signConfigs() {
		a, b := SampleBody(cfg, "evt_1", "t"), SampleBody(cfg, "evt_1", "t")
		if string(a) != string(b) {
			t.Errorf("%s: SampleBody differs between calls: %s / %s", name, a, b)
		}
	}
}

func TestSignErrors(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		name   string
		cfg    Config
		index  int
		errHas string
	}{
		{"index out of range", Config{Provider: "github", Secrets: []string{"s"}}, 1, "secrets[1]"},
		{"negative index", Config{Provider: "github", Secrets: []string{"s"}}, -1, "secrets[-1]"},
		{"public key cannot sign", Config{Provider: "standard", Secrets: []string{whpk}}, 0, "whsk_"},
		{"bad whsk_", Config{Provider: "standard", Secrets: []string{"whsk_AAAA"}}, 0, "whsk_"},
		{"bad whsec_", Config{Provider: "svix", Secrets: []string{"whsec_***"}}, 0, "base64"},
		{"unknown provider", Config{Provider: "pigeon", Secrets: []string{"s"}}, 0, "pigeon"},
	} {
		_, err := SignMessage(tt.cfg, tt.index, Message{ID: "x", Body: []byte("{}"), Time: now})
		if err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: err = %v, want it to name %q", tt.name, err, tt.errHas)
		}
	}
}

// A whsk_ key given as the 64-byte private key signs like its seed.
func TestSignWhskForms(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	v := newTestVerifier(t, Config{Provider: "standard", Secrets: []string{whpk}})
	for _, secret := range []string{whsk, "whsk_" + b64(edPriv)} {
		h, err := Sign(Config{Provider: "standard", Secrets: []string{secret}}, 0, "msg_1", []byte(`{}`), now)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h.Get("webhook-signature"), "v1a,") {
			t.Fatalf("signature %q is not v1a", h.Get("webhook-signature"))
		}
		if _, err := v.Verify(&Request{Header: h, Body: []byte(`{}`), Now: now}); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// TestSignNewFamilies: what SignMessage produces for the families and
// presets of issue 33 verifies in their verifiers (intake send, the load
// generators).
func TestSignNewFamilies(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, cfg := range []Config{
		{Provider: "paddle", Secrets: []string{"pdl"}},
		{Provider: "workos", Secrets: []string{"wos"}},
		{Provider: "vercel", Secrets: []string{"v"}},
		{Provider: "intercom", Secrets: []string{"i"}},
		{Provider: "typeform", Secrets: []string{"tf"}},
		{Provider: "coinbase", Secrets: []string{"cb"}},
		{Provider: "sentry", Secrets: []string{"sn"}},
		{Provider: "linear", Secrets: []string{"ln"}},
		{Provider: "bitbucket", Secrets: []string{"bb"}},
		{Provider: "gitlab-token", Secrets: []string{"glt"}},
		{Provider: "token", Secrets: []string{"t"}, Token: TokenConfig{Prefix: "Bearer "}, EventID: Field{Field: "id"}},
		{Provider: "basic", Secrets: []string{"u:p"}, EventID: Field{Header: "X-Id"}},
		{Provider: "pairs", Secrets: []string{"s"}, EventID: Field{Field: "id"},
			Pairs: PairsConfig{Header: "X-Sig", PairSeparator: ";", TimestampKey: "ts", TimestampFormat: "rfc3339", Encoding: "base64", Algorithm: "sha512"}},
		{Provider: "pairs", Secrets: []string{"s"}, EventID: Field{Field: "id"},
			Pairs: PairsConfig{Header: "X-Sig", TimestampHeader: "X-Ts", Template: "{body}{timestamp}", TimestampFormat: "unix_ms"}},
		{Provider: "hmac", Secrets: []string{"s"}, EventID: Field{Header: "X-Id"},
			HMAC: HMACConfig{Header: "X-Sig", Template: "{id}{timestamp}{body}", IDFormat: "uuid", TimestampHeader: "X-Ts", TimestampFormat: "rfc3339"}},
	} {
		cfg.Tolerance = DefaultTolerance
		v, err := New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", cfg.Provider, err)
		}
		const id = "0b7c5e8e-3f2a-4c1d-9e6f-1a2b3c4d5e6f"
		body, err := StampBody(cfg, SampleBody(cfg, id, "thing.happened"), now)
		if err != nil {
			t.Fatalf("%s: StampBody: %v", cfg.Provider, err)
		}
		h, err := SignMessage(cfg, 0, Message{ID: id, Type: "thing.happened", Body: body, Time: now})
		if err != nil {
			t.Fatalf("%s: %v", cfg.Provider, err)
		}
		ev, err := v.Verify(&Request{Header: h, Body: body, Now: now})
		if err != nil || ev.ID != id {
			t.Errorf("%s: Verify = %+v, %v (body %s, headers %v)", cfg.Provider, ev, err, body, h)
		}
	}
}

// StampBody writes the send time only where the scheme signs it inside the
// body, keeping the body's numbers as written.
func TestStampBody(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	body := []byte(`{"id":12345678901234567890,"webhookTimestamp":1}`)
	got, err := StampBody(Config{Provider: "linear"}, body, at)
	if err != nil || string(got) != `{"id":12345678901234567890,"webhookTimestamp":1700000000123}` {
		t.Fatalf("linear: %s, %v", got, err)
	}
	if got, err := StampBody(Config{Provider: "github"}, body, at); err != nil || string(got) != string(body) {
		t.Fatalf("github: %s, %v", got, err)
	}
	if _, err := StampBody(Config{Provider: "linear"}, []byte(`[1]`), at); err == nil {
		t.Fatal("an array was stamped")
	}
}
