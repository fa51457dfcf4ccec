package provider

// Conformance with Mailgun's and Paddle's own Go code (test-only
// dependencies): mailgun-go's VerifyWebhookSignature on the signature block
// of the body as mailgun-go decodes it, and paddle-go-sdk's WebhookVerifier.

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	paddlesdk "github.com/PaddleHQ/paddle-go-sdk/v4"
	mailgungo "github.com/mailgun/mailgun-go/v4"
)

// mailgunGoVerify decodes body as mailgun-go's webhook handler does
// (mailgun.WebhookPayload) and checks its signature block.
func mailgunGoVerify(t *testing.T, key, body string) bool {
	t.Helper()
	var p mailgungo.WebhookPayload
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		return false
	}
	mg := mailgungo.NewMailgun("example.com", "api-key-not-the-signing-key")
	mg.SetWebhookSigningKey(key)
	ok, err := mg.VerifyWebhookSignature(p.Signature)
	return ok && err == nil
}

func TestMailgunConformanceWithMailgunGo(t *testing.T) {
	const key = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"
	now := time.Unix(1529006854, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	const token = "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0"
	good := mailgunBody(key, ts, token, "DACSsAdVSeGpLid7TN03WA", "opened")
	cfg := Config{Provider: "mailgun", Secrets: []string{key}, Tolerance: DefaultTolerance}

	if !mailgunGoVerify(t, key, good) {
		t.Fatal("mailgun-go refuses the body signed as Mailgun documents")
	}
	if ev, err := newTestVerifier(t, cfg).Verify(&Request{Body: []byte(good), Now: now}); err != nil || ev.ID != "DACSsAdVSeGpLid7TN03WA" {
		t.Fatalf("Intake: %+v, %v", ev, err)
	}
	sig := good[strings.Index(good, `"signature":"`)+len(`"signature":"`):]
	sig = sig[:strings.Index(sig, `"`)]
	for name, body := range map[string]string{
		"another key":         mailgunBody("key-other", ts, token, "x", "opened"),
		"a changed token":     strings.Replace(good, token, token[:len(token)-1]+"1", 1),
		"a changed timestamp": strings.Replace(good, `"`+ts+`"`, `"`+strconv.FormatInt(now.Unix()+1, 10)+`"`, 1),
		"upper-case hex":      strings.Replace(good, sig, strings.ToUpper(sig), 1),
		"a short signature":   strings.Replace(good, sig, sig[:len(sig)-2], 1),
		"no signature block":  `{"event-data":{"id":"x","event":"opened"}}`,
	} {
		// mailgun-go decodes hex case-insensitively; so does Intake.
		wantOK := name == "upper-case hex"
		if got := mailgunGoVerify(t, key, body); got != wantOK {
			t.Errorf("%s: mailgun-go %v, want %v", name, got, wantOK)
		}
		_, err := newTestVerifier(t, cfg).Verify(&Request{Body: []byte(body), Now: now})
		if (err == nil) != wantOK {
			t.Errorf("%s: Intake %v, want accepted %v", name, err, wantOK)
		}
	}

	// Where Intake does more than mailgun-go, knowingly: the signature does
	// not cover the event, so a used token with another body is refused, and
	// the timestamp is held to ± tolerance. mailgun-go checks neither.
	v := newTestVerifier(t, cfg)
	if _, err := v.Verify(&Request{Body: []byte(good), Now: now}); err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(good, `"opened"`, `"clicked"`, 1)
	if !mailgunGoVerify(t, key, forged) {
		t.Fatal("mailgun-go refuses a changed event: it signs none")
	}
	if _, err := v.Verify(&Request{Body: []byte(forged), Now: now}); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("Intake, a used token with another event: %v", err)
	}
	if _, err := newTestVerifier(t, cfg).Verify(&Request{Body: []byte(good), Now: now.Add(time.Hour)}); !errors.Is(err, ErrTimestamp) {
		t.Fatalf("Intake, an hour later: %v", err)
	}
}

func TestPaddleConformanceWithPaddleGoSDK(t *testing.T) {
	cfg := Config{Provider: "paddle", Secrets: []string{"pdl_ntfset_other", paddleSecret}, Tolerance: DefaultTolerance}
	v := newTestVerifier(t, cfg)
	sdk := paddlesdk.NewWebhookVerifier(paddleSecret)
	sdkWindow := paddlesdk.NewWebhookVerifier(paddleSecret, paddlesdk.VerifierWithTimestampTolerance(DefaultTolerance))
	check := func(w *paddlesdk.WebhookVerifier, sig, body string) bool {
		ok, err := w.Verify(sdkRequest(hdr("Paddle-Signature", sig), body))
		return ok && err == nil
	}

	// paddle-go-sdk's own example, in both (the SDK without its optional
	// window: the example is from 2024).
	if !check(sdk, paddleSignature, paddleBody) {
		t.Fatal("paddle-go-sdk refuses its example")
	}
	if _, err := v.Verify(&Request{Header: hdr("Paddle-Signature", paddleSignature), Body: []byte(paddleBody), Now: time.Unix(paddleTS+3, 0)}); err != nil {
		t.Fatalf("Intake refuses paddle-go-sdk's example: %v", err)
	}

	// Ours signs, the SDK verifies, also with its timestamp window.
	now := time.Now()
	const body = `{"event_id":"evt_01hv","event_type":"transaction.completed","occurred_at":"2024-04-12T10:18:49.621022Z","notification_id":"ntf_1","data":{"id":"txn_1"}}`
	h, err := Sign(cfg, 1, "", []byte(body), now)
	if err != nil {
		t.Fatal(err)
	}
	sig := h.Get("Paddle-Signature")
	if !check(sdk, sig, body) || !check(sdkWindow, sig, body) {
		t.Fatalf("paddle-go-sdk refuses %q", sig)
	}
	if ev, err := v.Verify(&Request{Header: h, Body: []byte(body), Now: now}); err != nil || ev.ID != "evt_01hv" {
		t.Fatalf("Intake: %+v, %v", ev, err)
	}

	ts := strconv.FormatInt(now.Unix(), 10)
	h1 := sig[strings.Index(sig, "h1=")+3:]
	stale := now.Add(-DefaultTolerance - time.Minute)
	hs, _ := Sign(cfg, 1, "", []byte(body), stale)
	for name, d := range map[string]struct {
		sig, body string
		sdk       *paddlesdk.WebhookVerifier
	}{
		"tampered body":                   {sig, body + " ", sdk},
		"tampered ts":                     {"ts=" + strconv.FormatInt(now.Unix()-1, 10) + ";h1=" + h1, body, sdk},
		"another secret":                  {sig, body, paddlesdk.NewWebhookVerifier("pdl_ntfset_other")},
		"the SDK's bad form":              {"ts=x;h1=y", body, sdk},
		"truncated":                       {sig[:len(sig)-2], body, sdk},
		"no h1":                           {"ts=" + ts, body, sdk},
		"stale (the SDK with its window)": {hs.Get("Paddle-Signature"), body, sdkWindow},
	} {
		if check(d.sdk, d.sig, d.body) {
			t.Errorf("%s: paddle-go-sdk accepted", name)
		}
		secret := paddleSecret
		if name == "another secret" {
			secret = "pdl_ntfset_other"
		}
		one := newTestVerifier(t, Config{Provider: "paddle", Secrets: []string{secret}, Tolerance: DefaultTolerance})
		if _, err := one.Verify(&Request{Header: hdr("Paddle-Signature", d.sig), Body: []byte(d.body), Now: now}); err == nil {
			t.Errorf("%s: Intake accepted", name)
		}
	}

	// Where Intake is more lenient than paddle-go-sdk's format check
	// (^ts=\d+;h1=[a-f0-9]{64}$), knowingly: several h1 entries, any of which
	// may match (a sender's rotation), and upper-case hex. Each still needs
	// the MAC of ts:body.
	for _, s := range []string{
		"ts=" + ts + ";h1=" + strings.Repeat("0", 64) + ";h1=" + h1,
		"ts=" + ts + ";h1=" + strings.ToUpper(h1),
	} {
		if check(sdk, s, body) {
			t.Errorf("%q: paddle-go-sdk accepted", s)
		}
		if _, err := v.Verify(&Request{Header: http.Header{"Paddle-Signature": {s}}, Body: []byte(body), Now: now}); err != nil {
			t.Errorf("%q: Intake: %v", s, err)
		}
	}
}
