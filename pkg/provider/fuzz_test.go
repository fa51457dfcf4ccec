package provider

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"
	svix "github.com/svix/svix-webhooks/go"
)

// checkSentinel fails unless err wraps exactly the sentinels Reason knows, so
// ingress can always map a rejection to an answer.
func checkSentinel(t *testing.T, err error) {
	t.Helper()
	if Reason(err) == "error" {
		t.Fatalf("error wraps no sentinel: %v", err)
	}
}

func FuzzStandardVerify(f *testing.F) {
	secrets := []string{whsec(keyA), specSecret, whpk}
	specKey, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(specSecret, "whsec_"))
	keys := [][]byte{keyA, specKey}
	now := time.Unix(specTimestamp, 0)
	v, err := New(Config{Provider: "standard", Secrets: secrets})
	if err != nil {
		f.Fatal(err)
	}

	ts := strconv.Itoa(specTimestamp)
	f.Add(specMsgID, ts, specSignature, []byte(specPayload))
	f.Add("msg_1", ts, signStandard(keyA, "msg_1", specTimestamp, `{"type":"a.b"}`), []byte(`{"type":"a.b"}`))
	f.Add("msg_1", ts, "v1a,AAAA "+signStandard(keyA, "msg_1", specTimestamp, "x"), []byte("x"))
	f.Add("msg_1", ts, signStandardV1a(edPriv, "msg_1", specTimestamp, "y"), []byte("y"))
	f.Add("msg_1", "0"+ts, signStandardV1a(edPriv, "msg_1", specTimestamp, "y")+",z", []byte("y"))
	f.Add("msg_1", ts, "v1,!!!! v1, ,v1 v1,", []byte(`{"type":7}`))
	f.Add("", "", "", []byte(nil))
	f.Add("m", "+1614265330", specSignature, []byte("{"))
	f.Add("m", "99999999999999999999999", specSignature, []byte("{}"))

	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sig)
		ev, err := v.Verify(&Request{Header: h, Body: body, Now: now})
		if err != nil {
			checkSentinel(t, err)
			return
		}
		// Success must mean what the spec means: an id, an in-window
		// timestamp and an entry that verifies under the reported key.
		if ev.ID != id || id == "" {
			t.Fatalf("ID = %q, want webhook-id %q", ev.ID, id)
		}
		sec, perr := strconv.ParseInt(ts, 10, 64)
		if perr != nil || strings.Trim(ts, "0123456789") != "" || now.Sub(time.Unix(sec, 0)).Abs() > DefaultTolerance {
			t.Fatalf("accepted timestamp %q", ts)
		}
		signed := []byte(id + "." + strconv.FormatInt(sec, 10) + "." + string(body))
		for _, entry := range strings.Split(sig, " ") {
			parts := strings.Split(entry, ",")
			if len(parts) < 2 {
				continue
			}
			if ev.SecretIndex < 2 && parts[0] == "v1" {
				m := hmac.New(sha256.New, keys[ev.SecretIndex])
				m.Write(signed)
				if parts[1] == base64.StdEncoding.EncodeToString(m.Sum(nil)) {
					return
				}
			}
			if ev.SecretIndex == 2 && parts[0] == "v1a" {
				if raw, err := base64.StdEncoding.DecodeString(parts[1]); err == nil && ed25519.Verify(edPub, signed, raw) {
					return
				}
			}
		}
		t.Fatalf("accepted signature header %q without a valid entry for secrets[%d]", sig, ev.SecretIndex)
	})
}

// FuzzStandardDifferential checks Intake against the Standard Webhooks Go
// library: whatever Intake accepts, the library accepts; whatever the
// library accepts with a plain-digit timestamp, Intake accepts.
func FuzzStandardDifferential(f *testing.F) {
	v, err := New(Config{Provider: "standard", Secrets: []string{specSecret}})
	if err != nil {
		f.Fatal(err)
	}
	ref, err := standardwebhooks.NewWebhook(specSecret)
	if err != nil {
		f.Fatal(err)
	}
	ts := strconv.Itoa(specTimestamp)
	f.Add(specMsgID, ts, specSignature, []byte(specPayload))
	f.Add(specMsgID, "0"+ts, specSignature+",x v1,y", []byte(specPayload))
	f.Add(specMsgID, "+"+ts, "v2,a "+specSignature, []byte(specPayload))
	f.Add("m", ts, "v1,"+strings.Repeat("A", 43)+"=", []byte("{}"))

	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sig)
		compareWithReference(t, v, ref.VerifyIgnoringTimestamp, h, ts, body)
	})
}

// FuzzSvixDifferential does the same against svix-webhooks' library,
// including its fallback from svix-* to webhook-* headers.
func FuzzSvixDifferential(f *testing.F) {
	v, err := New(Config{Provider: "svix", Secrets: []string{specSecret}})
	if err != nil {
		f.Fatal(err)
	}
	ref, err := svix.NewWebhook(specSecret)
	if err != nil {
		f.Fatal(err)
	}
	ts := strconv.Itoa(specTimestamp)
	f.Add(specMsgID, ts, specSignature, "", "", "", []byte(specPayload))
	f.Add("", ts, specSignature, specMsgID, ts, specSignature, []byte(specPayload))
	f.Add("x", ts, "", specMsgID, ts, specSignature+" v1,zz", []byte(specPayload))
	f.Add(specMsgID, ts, "v1,bad", specMsgID, ts, specSignature, []byte(specPayload))

	f.Fuzz(func(t *testing.T, sid, sts, ssig, wid, wts, wsig string, body []byte) {
		h := http.Header{}
		h.Set("svix-id", sid)
		h.Set("svix-timestamp", sts)
		h.Set("svix-signature", ssig)
		h.Set("webhook-id", wid)
		h.Set("webhook-timestamp", wts)
		h.Set("webhook-signature", wsig)
		ts := wts
		if sid != "" && sts != "" && ssig != "" {
			ts = sts
		}
		compareWithReference(t, v, ref.VerifyIgnoringTimestamp, h, ts, body)
	})
}

// compareWithReference verifies with Now at the delivery's own timestamp (so
// tolerance is out of the picture, as for the reference's
// VerifyIgnoringTimestamp) and compares the outcomes.
func compareWithReference(t *testing.T, v Verifier, ref func([]byte, http.Header) error, h http.Header, ts string, body []byte) {
	t.Helper()
	now := time.Unix(specTimestamp, 0)
	digits := ts != "" && strings.Trim(ts, "0123456789") == ""
	if sec, err := strconv.ParseInt(ts, 10, 64); err == nil && digits {
		now = time.Unix(sec, 0)
	}
	_, err := v.Verify(&Request{Header: h, Body: body, Now: now})
	if err != nil {
		checkSentinel(t, err)
	}
	refErr := ref(body, h)
	if err == nil && refErr != nil {
		t.Fatalf("Intake accepted what the reference rejects (%v)", refErr)
	}
	if refErr == nil && digits && err != nil {
		t.Fatalf("the reference accepted what Intake rejects: %v", err)
	}
}

// FuzzStripeDifferential checks the Stripe-Signature parser against
// stripe-go, tolerance aside: a signature Intake accepts, stripe-go accepts;
// one stripe-go accepts with plain-digit t values, Intake accepts.
func FuzzStripeDifferential(f *testing.F) {
	v, err := New(Config{Provider: "stripe", Secrets: []string{stripeSecret}})
	if err != nil {
		f.Fatal(err)
	}
	// Before every timestamp a fuzzer can write: the past-only window never
	// rejects, as with stripe-go's ValidatePayloadIgnoringTolerance.
	early := time.Unix(-1<<40, 0)
	body := stripeBody("evt_f")
	good := stripeSig(stripeSecret, 1_700_000_000, body)
	f.Add("t=1700000000,v1="+good, []byte(body))
	f.Add("t=1700000000,v0=ab,v1=zz,v1="+good+",x=y", []byte(body))
	f.Add("t=1,t=1700000000,v1="+good, []byte(body))
	f.Add("t=01700000000,v1="+good, []byte(body))
	f.Add("t=+1700000000,v1="+good, []byte(body))
	f.Add("v1="+good+",t=1700000000,", []byte(body))
	f.Add("t=1700000000,v1="+good+"=", []byte("{}"))
	f.Add("", []byte(nil))

	f.Fuzz(func(t *testing.T, header string, body []byte) {
		_, err := v.Verify(&Request{Header: hdr("Stripe-Signature", header), Body: body, Now: early})
		if err != nil {
			checkSentinel(t, err)
		}
		// A verified body without an event id is malformed, not unsigned.
		ours := err == nil || errors.Is(err, ErrMalformed)
		theirs := webhook.ValidatePayloadIgnoringTolerance(body, header, stripeSecret)
		if ours && theirs != nil {
			t.Fatalf("Intake accepted a signature stripe-go rejects (%v)", theirs)
		}
		digits := true
		for _, pair := range strings.Split(header, ",") {
			if k, val, _ := strings.Cut(pair, "="); k == "t" && (val == "" || strings.Trim(val, "0123456789") != "") {
				digits = false
			}
		}
		if theirs == nil && digits && !ours {
			t.Fatalf("stripe-go accepted a signature Intake rejects: %v", err)
		}
	})
}

func FuzzGitHubVerify(f *testing.F) {
	v, err := New(Config{Provider: "github", Secrets: []string{githubOtherSecret, githubSecret}})
	if err != nil {
		f.Fatal(err)
	}
	const body = `{"zen":"Keep it logically awesome."}`
	f.Add(githubSig(githubSecret, body), "d-1", "ping", []byte(body))
	f.Add(strings.ToUpper(githubSig(githubSecret, body)), "d-1", "", []byte(body))
	f.Add("sha1="+strings.Repeat("0", 40), "d", "push", []byte("x"))
	f.Add("", "", "", []byte(nil))

	f.Fuzz(func(t *testing.T, sig, delivery, event string, body []byte) {
		ev, err := v.Verify(&Request{Header: githubHeader(sig, delivery, event), Body: body})
		if err != nil {
			checkSentinel(t, err)
			return
		}
		if ev.ID != delivery || ev.Type != event {
			t.Fatalf("event %+v from delivery %q event %q", ev, delivery, event)
		}
		secret := []string{githubOtherSecret, githubSecret}[ev.SecretIndex]
		if !strings.EqualFold(sig, githubSig(secret, string(body))) || !strings.HasPrefix(sig, "sha256=") {
			t.Fatalf("accepted %q, not the MAC of the body", sig)
		}
	})
}

func FuzzShopifyVerify(f *testing.F) {
	v, err := New(Config{Provider: "shopify", Secrets: []string{shopifySecret}, AllowedShops: []string{"acme.myshopify.com"}})
	if err != nil {
		f.Fatal(err)
	}
	const body = `{"admin_graphql_api_id":"gid://shopify/Order/1","updated_at":"2024-01-01T00:00:00Z"}`
	const future = `{"admin_graphql_api_id":"gid://shopify/Order/1","updated_at":"9999-12-31T23:59:59Z"}`
	const jwt = `eyJhbGciOiJIUzI1NiJ9.eyJkZXN0IjoiaHR0cHM6Ly9hY21lLm15c2hvcGlmeS5jb20ifQ`
	f.Add(shopifySig(shopifySecret, body), "acme.myshopify.com", "ev", "wh", "2024-01-01T00:00:00Z", []byte(body))
	f.Add(shopifySig(shopifySecret, future), "acme.myshopify.com", "ev", "wh", "", []byte(future))
	f.Add(shopifySig(shopifySecret, jwt), "acme.myshopify.com", "ev", "wh", "", []byte(jwt))
	f.Add(shopifySig(shopifySecret, body), "ACME.myshopify.com", "", "wh", "", []byte(body))
	f.Add(shopifySig(shopifySecret, "<x/>"), "acme.myshopify.com", "", "wh", "", []byte("<x/>"))
	f.Add(shopifySig(shopifySecret, body), "evil.myshopify.com", "ev", "", "", []byte(body))
	f.Add("", "", "", "", "", []byte(nil))

	f.Fuzz(func(t *testing.T, sig, shop, eventID, webhookID, triggered string, body []byte) {
		h := hdr("X-Shopify-Hmac-Sha256", sig, "X-Shopify-Shop-Domain", shop, "X-Shopify-Event-Id", eventID,
			"X-Shopify-Webhook-Id", webhookID, "X-Shopify-Triggered-At", triggered)
		ev, err := v.Verify(&Request{Header: h, Body: body})
		if err != nil {
			checkSentinel(t, err)
			return
		}
		if sig != shopifySig(shopifySecret, string(body)) {
			t.Fatalf("accepted %q, not the MAC of the body", sig)
		}
		if ev.Account != "acme.myshopify.com" {
			t.Fatalf("accepted shop %q as %q", shop, ev.Account)
		}
		if want := eventID; (want == "" && ev.ID != webhookID) || (want != "" && ev.ID != want) {
			t.Fatalf("ID %q from event id %q, webhook id %q", ev.ID, eventID, webhookID)
		}
		// Only a JSON object is a webhook (a token's signed text is not),
		// and the version is the signed updated_at, never in the future.
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil {
			t.Fatalf("accepted a body that is no JSON object: %q", body)
		}
		if ev.ObjectVersion != "" {
			var updated string
			if json.Unmarshal(obj["updated_at"], &updated) != nil || updated != ev.ObjectVersion {
				t.Fatalf("ObjectVersion %q is not the body's updated_at %s", ev.ObjectVersion, obj["updated_at"])
			}
			if v, err := time.Parse(time.RFC3339Nano, updated); err == nil && v.After(time.Now().Add(DefaultTolerance)) {
				t.Fatalf("accepted a future version %q", updated)
			}
		}
	})
}

func FuzzSlackVerify(f *testing.F) {
	v, err := New(Config{Provider: "slack", Secrets: []string{slackSecret}})
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	ts := "1700000000"
	for _, body := range []string{
		`{"type":"event_callback","event_id":"Ev1","event":{"type":"message"}}`,
		`{"type":"url_verification","challenge":"abc"}`,
		`{"type":"url_verification","challenge":"a
b"}`,
		`token=x&command=%2Fx`,
	} {
		f.Add(ts, slackSig(slackSecret, ts, body), []byte(body))
	}
	f.Add("1700000301", slackSig(slackSecret, "1700000301", "{}"), []byte("{}"))
	f.Add("", "", []byte(nil))

	f.Fuzz(func(t *testing.T, ts, sig string, body []byte) {
		h := slackHeader(ts, sig)
		// The retry headers are unsigned: fuzz them with the body's bytes.
		h.Set("X-Slack-Retry-Num", string(body[:min(len(body), 4)]))
		h.Set("X-Slack-Retry-Reason", string(body))
		ev, err := v.Verify(&Request{Header: h, Body: body, Now: now})
		if err != nil {
			checkSentinel(t, err)
			return
		}
		for _, hint := range ev.RetryHints {
			if len(hint.Value) > 32 || strings.Trim(hint.Value, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
				t.Fatalf("kept retry hint %q=%q", hint.Name, hint.Value)
			}
		}
		sec, perr := strconv.ParseInt(ts, 10, 64)
		if perr != nil || strings.Trim(ts, "0123456789") != "" || now.Sub(time.Unix(sec, 0)).Abs() > DefaultTolerance {
			t.Fatalf("accepted timestamp %q", ts)
		}
		if !strings.EqualFold(sig, slackSig(slackSecret, ts, string(body))) || !strings.HasPrefix(sig, "v0=") {
			t.Fatalf("accepted %q, not the MAC", sig)
		}
		if (ev.Challenge == "") == (ev.ID == "") {
			t.Fatalf("event %+v: exactly one of id and challenge must be set", ev)
		}
		if ev.Challenge != "" && !validChallenge(ev.Challenge) {
			t.Fatalf("challenge %q would be echoed", ev.Challenge)
		}
	})
}

// FuzzHMACTemplate checks the template parser against Sign's plain
// substitution: for any template New accepts, what Sign produces verifies,
// and the parts spell the template back.
func FuzzHMACTemplate(f *testing.F) {
	for _, tmpl := range []string{"{body}", "{timestamp}.{body}", "v0:{timestamp}:{body}", "{id}.{timestamp}.{body}",
		"{{body}}", "{timestamp{body}", "}{body}{", "{ {body} }", "{body}{timestamp}{timestamp}"} {
		f.Add(tmpl, "evt_1", []byte(`{"id":"evt_1"}`))
	}
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, tmpl, id string, body []byte) {
		parts, err := parseTemplate(tmpl)
		if err != nil {
			return
		}
		var back strings.Builder
		for _, p := range parts {
			if p.placeholder != "" {
				back.WriteString("{" + p.placeholder + "}")
			} else {
				back.WriteString(p.literal)
			}
		}
		if tmpl != "" && back.String() != tmpl {
			t.Fatalf("parts %q spell %q", tmpl, back.String())
		}
		// Side by side only where the timestamp's format gives the split:
		// before {body} the left one, from {body} on the right one.
		if _, err := checkAdjacency(parts, fixedFormats{timestamp: true}); err == nil {
			seenBody := false
			for i := 1; i < len(parts); i++ {
				seenBody = seenBody || parts[i-1].placeholder == "body"
				if a, b := parts[i-1].placeholder, parts[i].placeholder; a != "" && b != "" {
					if fixed := map[bool]string{false: a, true: b}[seenBody]; fixed != "timestamp" {
						t.Fatalf("template %q: {%s}{%s} side by side accepted", tmpl, a, b)
					}
				}
			}
		}
		cfg := Config{Provider: "hmac", Secrets: []string{hmacSecret}, EventID: Field{Header: "X-Id"},
			HMAC: HMACConfig{Header: "X-Sig", Template: tmpl, AllowUnsignedID: true}}
		if strings.Contains(tmpl, "{timestamp}") {
			cfg.HMAC.TimestampHeader = "X-Ts"
		}
		v, err := New(cfg)
		if err != nil || id == "" || strings.ContainsAny(id, "\r\n") {
			return
		}
		h, err := Sign(cfg, 0, id, body, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(&Request{Header: h, Body: body, Now: now}); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("template %q: Sign's output does not verify: %v", tmpl, err)
		}
	})
}

func FuzzUnixTimestamp(f *testing.F) {
	for _, s := range []string{"1700000000", "0", "", "+1", "-1", "1.5", " 1", "99999999999999999999", "0001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ts string) {
		sec, err := parseUnixSeconds(ts)
		want, perr := strconv.ParseInt(ts, 10, 64)
		digits := ts != "" && strings.Trim(ts, "0123456789") == ""
		switch {
		case err == nil && (!digits || perr != nil || sec != want):
			t.Fatalf("parseUnixSeconds(%q) = %d, want a rejection or %d", ts, sec, want)
		case err != nil && digits && perr == nil:
			t.Fatalf("parseUnixSeconds(%q) rejected a plain unix time: %v", ts, err)
		case err != nil && !errors.Is(err, ErrTimestamp):
			t.Fatalf("error %v does not wrap ErrTimestamp", err)
		}
	})
}

func FuzzHMACVerify(f *testing.F) {
	vhex, err := New(Config{Provider: "hmac", Secrets: []string{hmacOtherSecret, hmacSecret},
		HMAC:    HMACConfig{Header: "X-Sig", Prefix: "sha256=", AllowUnsignedID: true},
		EventID: Field{Header: "X-Event-Id", Field: "id"}, EventType: Field{Field: "type"}})
	if err != nil {
		f.Fatal(err)
	}
	vb64, err := New(Config{Provider: "hmac", Secrets: []string{hmacSecret},
		HMAC: HMACConfig{Header: "X-Sig", Algorithm: "sha512", Encoding: "base64"}, EventID: Field{Field: "data.id"}})
	if err != nil {
		f.Fatal(err)
	}

	body := `{"id":"evt_1","type":"t","data":{"id":42}}`
	f.Add("sha256="+hex.EncodeToString(macOf(sha256.New, hmacSecret, body)), "", []byte(body))
	f.Add("sha256="+hex.EncodeToString(macOf(sha256.New, hmacSecret, "{")), "hdr_1", []byte("{"))
	f.Add("sha256="+hex.EncodeToString(macOf(sha256.New, hmacSecret, "[]")), "", []byte("[]"))
	f.Add("sha256=zz", "", []byte(body))
	f.Add("", "", []byte(nil))
	f.Add("AAAA==", "x", []byte("\xff"))

	f.Fuzz(func(t *testing.T, sig, idHeader string, body []byte) {
		h := http.Header{}
		h.Set("X-Sig", sig)
		h.Set("X-Event-Id", idHeader)
		var hexOK bool
		for _, v := range []Verifier{vhex, vb64} {
			ev, err := v.Verify(&Request{Header: h, Body: body})
			if err != nil {
				checkSentinel(t, err)
				continue
			}
			if ev.ID == "" {
				t.Fatal("accepted a delivery without an event id")
			}
			hexOK = hexOK || v == vhex
		}
		if !hexOK {
			return
		}
		// Only a real MAC passes: "sha256=" + hex is its sole spelling apart
		// from the letter case of the hex digits.
		mac, ok := strings.CutPrefix(sig, "sha256=")
		if !ok {
			t.Fatalf("accepted %q without the configured prefix", sig)
		}
		for _, s := range []string{hmacOtherSecret, hmacSecret} {
			if strings.EqualFold(mac, hex.EncodeToString(macOf(sha256.New, s, string(body)))) {
				return
			}
		}
		t.Fatalf("accepted signature %q that is no MAC of the body", sig)
	})
}

// FuzzHMACBodyTimestamp: hmac.timestamp_field on correctly signed bodies
// (Linear's webhookTimestamp). A body is accepted only when encoding/json
// reads it too and finds at the field a whole number of milliseconds
// within tolerance of now; every refusal wraps a sentinel.
func FuzzHMACBodyTimestamp(f *testing.F) {
	cfg := Config{Provider: "linear", Secrets: []string{hmacSecret}, Tolerance: time.Minute}
	v, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	now := time.UnixMilli(1_700_000_000_000)
	for _, b := range []string{`{"webhookTimestamp":1700000000000}`, `{"webhookTimestamp":1699999940000,"x":1}`,
		`{"webhookTimestamp":"1700000000000"}`, `{"webhookTimestamp":1.7e12}`, `{"webhookTimestamp":01700000000000}`,
		`{"webhookTimestamp":1700000000000,"WebhookTimestamp":1}`, `{"a":{"webhookTimestamp":1700000000000}}`, `[1700000000000]`, `{`} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		h := hdr("Linear-Signature", hex.EncodeToString(macOf(sha256.New, hmacSecret, string(body))), "Linear-Delivery", "d-1")
		_, err := v.Verify(&Request{Header: h, Body: body, Now: now})
		if err != nil {
			checkSentinel(t, err)
			if errors.Is(err, ErrBadSignature) || errors.Is(err, ErrMissingHeader) {
				t.Fatalf("a signed body refused as %v", err)
			}
			return
		}
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.UseNumber()
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("accepted a body encoding/json refuses: %v", err)
		}
		n, ok := doc["webhookTimestamp"].(json.Number)
		if !ok || strings.ContainsAny(string(n), ".eE-+") {
			t.Fatalf("accepted webhookTimestamp %#v", doc["webhookTimestamp"])
		}
		ms, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || ms < now.Add(-time.Minute).UnixMilli() || ms > now.Add(time.Minute).UnixMilli() {
			t.Fatalf("accepted webhookTimestamp %s outside the window", n)
		}
	})
}

func FuzzJSONField(f *testing.F) {
	f.Add([]byte(`{"data":{"object":{"id":"ch_1"}}}`), "data.object.id", "ch_1")
	f.Add([]byte(`{"id":12345678901234567890}`), "id", "")
	f.Add([]byte(`{"a.b":"x"}`), `a\.b`, "\u00e9\"\\")
	f.Add([]byte(`{"items":[{"id":"a"}]}`), "items.0.id", "\x00\xff")
	f.Add([]byte(`{"id":"x"`), "id", "")
	f.Add([]byte(`[1,2,{"a":null}]`), "2.a", "")
	f.Add([]byte(``), "@reverse", "")
	f.Add([]byte(`{"a":{"b":1}}`), "a..b", "")
	f.Add([]byte(`{"id":"a","id":"b"}`), "id", "")
	f.Add([]byte(`{"id":"a","ID":"b"}`), "id", "")
	f.Add([]byte(`{"d":{"id":"a"},"d":{"id":"b"}}`), "d.id", "")

	f.Fuzz(func(t *testing.T, body []byte, path, value string) {
		if validatePath(path) == nil {
			got, err := jsonField(body, path)
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			// gjson's validator and encoding/json's must agree on what JSON is,
			// or a body would be malformed for one reader and not another.
			if valid := json.Valid(body); valid == errors.Is(err, errNotJSON) {
				t.Fatalf("encoding/json Valid = %v, jsonField err = %v", valid, err)
			}
			// What Intake reads is what a subscriber decoding with
			// encoding/json reads: duplicated keys, which the two resolve
			// differently, are refused.
			if err == nil {
				if want, ok := stdlibField(body, path); ok && want != got {
					t.Fatalf("jsonField(%s, %q) = %q, encoding/json reads %q", body, path, got, want)
				}
			}
		}

		// Round trip: whatever string encoding/json writes, the field reads
		// back as encoding/json reads it.
		doc, err := json.Marshal(map[string]map[string]string{"k": {"v": value}})
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]map[string]string
		if err := json.Unmarshal(doc, &back); err != nil {
			t.Fatal(err)
		}
		got, err := jsonField(doc, "k.v")
		if err != nil || got != back["k"]["v"] {
			t.Fatalf("jsonField(%s) = %q, %v; want %q", doc, got, err, back["k"]["v"])
		}
	})
}

// stdlibField reads path as encoding/json does (a map per object, so the
// last of duplicated keys): the value as jsonField reports it, and false
// when the path cannot be followed that way.
func stdlibField(body []byte, path string) (string, bool) {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	var cur any
	if dec.Decode(&cur) != nil {
		return "", false
	}
	for rest := path; ; {
		var key string
		key, rest = nextKey(rest)
		switch node := cur.(type) {
		case map[string]any:
			cur = node[key]
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(node) || strconv.Itoa(i) != key {
				return "", false
			}
			cur = node[i]
		default:
			return "", true
		}
		if rest == "" {
			break
		}
	}
	switch v := cur.(type) {
	case string:
		return v, true
	case json.Number:
		return string(v), true
	default:
		return "", true
	}
}
