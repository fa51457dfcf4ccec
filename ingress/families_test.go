package ingress_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
)

const familiesY = `
nats: {publish_timeout: 2s}
ingress: {client_rate_limit: {per_second: -1}}
integrations:
  - {name: pad, provider: paddle, tenant: acme, secrets: ["pdl_old", "pdl_new"]}
  - {name: vcl, provider: vercel, tenant: acme, secrets: ["vercel-secret"]}
  - {name: tok, provider: token, tenant: acme, secrets: ["tok-old", "tok-new"], token: {header: X-Hook-Token}, event_id: {header: X-Delivery}}
  - {name: bas, provider: basic, tenant: acme, secrets: ["hooks:pw-1"], event_id: {field: id}}
  - {name: mg, provider: mailgun, tenant: acme, secrets: ["key-mailgun"]}
`

func hexMAC(newHash func() hash.Hash, secret, msg string) string {
	m := hmac.New(newHash, []byte(secret))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// TestFamiliesThroughHTTP: a preset on the pairs family, a SHA-1 preset and
// the static-secret families, through the HTTP server into a real stream.
// SHA-1 is warned about at start and shown by intake_ingress_weak_algorithm.
func TestFamiliesThroughHTTP(t *testing.T) {
	var logs testenv.Buffer
	r := startRigLog(t, familiesY, 0, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if got := testutil.ToFloat64(r.metrics.WeakAlgorithm.WithLabelValues("vcl", "sha1")); got != 1 {
		t.Errorf("intake_ingress_weak_algorithm{vcl,sha1} = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(r.metrics.WeakAlgorithm); n != 1 {
		t.Errorf("%d weak-algorithm series, want only vcl's", n)
	}
	if !strings.Contains(logs.String(), "weak hash") || !strings.Contains(logs.String(), "integration=vcl") {
		t.Errorf("no start-up warning for vcl: %s", logs.String())
	}

	t.Run("paddle", func(t *testing.T) {
		body := `{"event_id":"evt_pad_1","event_type":"transaction.paid","data":{}}`
		sign := func(secret string, at time.Time) request {
			ts := strconv.FormatInt(at.Unix(), 10)
			return request{header: hdr("Paddle-Signature", "ts="+ts+";h1="+hexMAC(sha256.New, secret, ts+":"+body)), body: []byte(body)}
		}
		now := time.Now()
		good := sign("pdl_new", now)
		r.checkProvider(t, "pad", []accepted{
			{name: "signed as paddle-go-sdk verifies", req: good, key: "pad//evt_pad_1", typ: "transaction.paid", secretIndex: 1},
		}, []rejected{
			{"tampered", tampered(good), 401, "bad_signature"},
			{"wrong secret", sign("pdl_wrong", now), 401, "bad_signature"},
			{"stale", sign("pdl_new", now.Add(-6*time.Minute)), 401, "timestamp"},
			{"no header", without(good, "Paddle-Signature"), 401, "missing_header"},
		})
	})

	t.Run("vercel sha1", func(t *testing.T) {
		body := `{"id":"evt_vcl_1","type":"deployment.created","payload":{}}`
		good := request{header: hdr("X-Vercel-Signature", hexMAC(sha1.New, "vercel-secret", body)), body: []byte(body)}
		r.checkProvider(t, "vcl", []accepted{{name: "sha1 of the body", req: good, key: "vcl//evt_vcl_1", typ: "deployment.created"}},
			[]rejected{{"tampered", tampered(good), 401, "bad_signature"}})
	})

	t.Run("token", func(t *testing.T) {
		body := `{"kind":"push"}`
		good := request{header: hdr("X-Hook-Token", "tok-new", "X-Delivery", "d-1"), body: []byte(body)}
		r.checkProvider(t, "tok", []accepted{{name: "the second token", req: good, key: "tok//d-1", secretIndex: 1}},
			[]rejected{
				{"wrong token", setHeader(good, "X-Hook-Token", "tok-neW"), 401, "bad_signature"},
				{"token prefix only", setHeader(good, "X-Hook-Token", "tok-"), 401, "bad_signature"},
				{"no token", without(good, "X-Hook-Token"), 401, "missing_header"},
				{"no id", without(good, "X-Delivery"), 400, "malformed"},
			})
	})

	t.Run("mailgun: the signature in the body", func(t *testing.T) {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		const token = "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0"
		sig := hexMAC(sha256.New, "key-mailgun", ts+token)
		body := `{"signature":{"timestamp":"` + ts + `","token":"` + token + `","signature":"` + sig + `"},"event-data":{"event":"delivered","id":"mg-evt-1"}}`
		good := request{header: hdr("Content-Type", "application/json"), body: []byte(body)}
		r.checkProvider(t, "mg", []accepted{{name: "signed as Mailgun documents", req: good, key: "mg//mg-evt-1", typ: "delivered"}},
			[]rejected{{"no signature", request{header: good.header, body: []byte(`{"event-data":{"id":"x"}}`)}, 401, "missing_header"}})
		// The body is not signed: the captured signature block carrying
		// another event is refused once its token was used.
		forged := request{header: good.header, body: []byte(strings.Replace(body, "mg-evt-1", "mg-evt-2", 1))}
		if a := r.post("mg", forged); a.code != 401 || a.reason != "bad_signature" {
			t.Fatalf("a used token with another body: %d %s", a.code, a.raw)
		}
	})

	t.Run("basic", func(t *testing.T) {
		body := `{"id":"bas_1"}`
		auth := func(cred string) request {
			return request{header: hdr("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred))), body: []byte(body)}
		}
		r.checkProvider(t, "bas", []accepted{{name: "user and password", req: auth("hooks:pw-1"), key: "bas//bas_1"}},
			[]rejected{
				{"wrong password", auth("hooks:pw-2"), 401, "bad_signature"},
				{"bearer", request{header: hdr("Authorization", "Bearer hooks:pw-1"), body: []byte(body)}, 401, "bad_signature"},
			})
	})
}

// TestPayPalKeyUnavailable: a certificate that cannot be fetched now is
// never a verdict on the delivery: 503 with Retry-After, nothing published.
func TestPayPalKeyUnavailable(t *testing.T) {
	r := startRigYAML(t, `
nats: {publish_timeout: 2s}
ingress: {client_rate_limit: {per_second: -1}}
integrations:
  - {name: pp, provider: paypal, tenant: acme, secrets: ["WH-1"], key_url_hosts: ["127.0.0.1"]}
`, 0)
	body := `{"id":"WH-EVT-1","event_type":"PAYMENT.CAPTURE.COMPLETED"}`
	req := request{body: []byte(body), header: hdr("Paypal-Transmission-Id", "t-1", "Paypal-Transmission-Time", time.Now().UTC().Format(time.RFC3339),
		"Paypal-Cert-Url", "https://127.0.0.1:1/cert.pem", "Paypal-Auth-Algo", "SHA256withRSA", "Paypal-Transmission-Sig", base64.StdEncoding.EncodeToString([]byte("sig")))}
	a := r.post("pp", req)
	if a.code != 503 || a.reason != "key_unavailable" || a.header.Get("Retry-After") == "" {
		t.Fatalf("answered %d %s (Retry-After %q)", a.code, a.raw, a.header.Get("Retry-After"))
	}
	// A URL off the allowlist is the request's claim: 401, nothing fetched.
	a = r.post("pp", setHeader(req, "Paypal-Cert-Url", "https://evil.example/cert.pem"))
	if a.code != 401 || a.reason != "bad_signature" {
		t.Fatalf("off the allowlist: %d %s", a.code, a.raw)
	}
	if n := len(r.published("pp")); n != 0 {
		t.Fatalf("published %d", n)
	}
}

// TestJWKSKeyUnavailable: a pubkey integration whose key set is slow (a
// server that accepts and never answers) answers 503 key_unavailable with
// Retry-After once the fetch times out, never 200; meanwhile another
// integration's deliveries are answered at once.
func TestJWKSKeyUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	})
	r := startRigYAML(t, `
nats: {publish_timeout: 2s}
ingress: {client_rate_limit: {per_second: -1}}
integrations:
  - name: jw
    provider: pubkey
    tenant: acme
    pubkey: {algorithm: ed25519, header: X-Sig, key_url: "https://`+ln.Addr().String()+`/jwks.json", kid_header: X-Kid}
    event_id: {field: id}
  - {name: vcl, provider: vercel, tenant: acme, secrets: ["vercel-secret"]}
`, 0)
	slow := make(chan answer, 1)
	go func() {
		slow <- r.post("jw", request{header: hdr("X-Sig", base64.StdEncoding.EncodeToString(make([]byte, 64)), "X-Kid", "k1"), body: []byte(`{"id":"j-1"}`)})
	}()
	held := <-accepted // the fetch is under way, and will not end before its timeout
	defer held.Close()
	body := `{"id":"evt_vcl_9","type":"deployment.created","payload":{}}`
	if a := r.post("vcl", request{header: hdr("X-Vercel-Signature", hexMAC(sha1.New, "vercel-secret", body)), body: []byte(body)}); a.code != 200 || a.status != "accepted" {
		t.Fatalf("another integration while a key set is slow: %d %s", a.code, a.raw)
	}
	if len(slow) != 0 {
		t.Fatal("the slow integration answered before its fetch timed out")
	}
	a := <-slow
	if a.code != 503 || a.reason != "key_unavailable" || a.header.Get("Retry-After") == "" {
		t.Fatalf("a slow key set: %d %s (Retry-After %q)", a.code, a.raw, a.header.Get("Retry-After"))
	}
	if n := len(r.published("jw")); n != 0 {
		t.Fatalf("published %d", n)
	}
}
