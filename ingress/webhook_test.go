package ingress_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripego "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/intakehq/intake/ingress"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/internal/httpserver"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Secrets of the test configuration. Each provider has an old and a new
// secret, so every test also exercises rotation.
const (
	whsecOld     = "whsec_b2xkLXN0YW5kYXJkLWtleS0wMTIzNDU2Nzg5YWJj"
	whsecNew     = "whsec_bmV3LXN0YW5kYXJkLWtleS0wMTIzNDU2Nzg5YWJj"
	whsecWrong   = "whsec_d3Jvbmctc3RhbmRhcmQta2V5LTAxMjM0NTY3ODk="
	stripeOld    = "whsec_stripe_old_0123456789"
	stripeNew    = "whsec_stripe_new_0123456789"
	githubNew    = "github-secret-new"
	shopifyNew   = "shopify-secret-new"
	slackNew     = "slack-signing-secret-new"
	hmacNew      = "partner-secret-new"
	wrongSecret  = "not-the-secret-at-all"
	allowedShop  = "acme.myshopify.com"
	testIngressY = `
nats: {publish_timeout: 2s}
integrations:
  - {name: std, provider: standard, tenant: acme, account: main, secrets: ["` + whsecOld + `", "` + whsecNew + `", "%s"]}
  - {name: svx, provider: svix, tenant: acme, secrets: ["` + whsecOld + `", "` + whsecNew + `"]}
  - {name: str, provider: stripe, tenant: acme, secrets: ["` + stripeOld + `", "` + stripeNew + `"]}
  - {name: gh, provider: github, tenant: acme, secrets: ["github-secret-old", "` + githubNew + `"]}
  - {name: shop, provider: shopify, tenant: acme, secrets: ["shopify-secret-old", "` + shopifyNew + `"], allowed_shops: [` + allowedShop + `]}
  - {name: slk, provider: slack, tenant: acme, secrets: ["slack-signing-secret-old", "` + slackNew + `"]}
  - name: hm
    provider: hmac
    tenant: acme
    secrets: ["partner-secret-old", "` + hmacNew + `"]
    hmac: {header: X-Signature, algorithm: sha512, encoding: base64, timestamp_header: X-Timestamp, template: "{timestamp}.{body}"}
    event_id: {field: id}
    event_type: {field: type}
    object_id: {field: order.id}
    object_version: {field: order.version}
  - {name: limited, provider: github, tenant: acme, secrets: ["x"], rate_limit: {per_second: 0.001, burst: 2}}
  - {name: small, provider: standard, tenant: acme, secrets: ["` + whsecNew + `"], max_body_bytes: 64}
`
)

// An ed25519 pair for Standard Webhooks v1a.
var (
	edSeed = []byte("ingress-test-ed25519-seed-000000")
	edPub  = ed25519.NewKeyFromSeed(edSeed).Public().(ed25519.PublicKey)
	whpk   = "whpk_" + base64.StdEncoding.EncodeToString(edPub)
	whsk   = "whsk_" + base64.StdEncoding.EncodeToString(edSeed)
)

// rig is ingress alone — the real HTTP server and service — publishing into
// an embedded nats-server's INTAKE_IN.
type rig struct {
	t       *testing.T
	cfg     *config.Config
	base    string
	js      jetstream.JetStream
	metrics *telemetry.Metrics
	client  *http.Client
}

func startRig(t *testing.T) *rig {
	t.Helper()
	return startRigYAML(t, fmt.Sprintf(testIngressY, whpk), 0)
}

// startRigYAML is a rig on config y; maxConns > 0 caps its listener's
// connections as package intake does (httpserver.LimitListener).
func startRigYAML(t *testing.T, y string, maxConns int) *rig {
	t.Helper()
	return startRigLog(t, y, maxConns, telemetry.Discard())
}

// startRigLog is startRigYAML with ingress logging to log.
func startRigLog(t *testing.T, y string, maxConns int, log *slog.Logger) *rig {
	t.Helper()
	ctx := context.Background()
	cfg := testrig.ParseConfig(t, y)
	js := testrig.NATS(t, cfg.NATS.Stream).JS
	m := telemetry.NewMetrics()
	svc, err := ingress.New(ingress.Options{Config: cfg, JS: js, Metrics: m, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.New(ln.Addr().String(), svc.Handler(), cfg.Ingress.Timeouts())
	if maxConns > 0 {
		limited := httpserver.LimitListener(ln, maxConns, false, nil)
		srv.ConnState = limited.ConnState
		ln = limited
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return &rig{t: t, cfg: cfg, base: "http://" + ln.Addr().String(), js: js, metrics: m, client: client}
}

// streamClient connects to n and creates the configured streams.
func streamClient(t testing.TB, n *testenv.NATSServer, cfg *config.Config) jetstream.JetStream {
	t.Helper()
	_, js := testrig.Connect(t, n.URL())
	if err := stream.Ensure(context.Background(), js, cfg.NATS.Stream); err != nil {
		t.Fatal(err)
	}
	return js
}

// request is one delivery as a provider sends it.
type request struct {
	header http.Header
	body   []byte
}

type answer struct {
	code      int
	header    http.Header
	raw       []byte
	status    string
	key       string
	reason    string
	challenge string
}

func (r *rig) post(integration string, req request) answer {
	r.t.Helper()
	hr, err := http.NewRequest(http.MethodPost, r.base+"/webhooks/"+integration, bytes.NewReader(req.body))
	if err != nil {
		r.t.Fatal(err)
	}
	hr.Header = req.header.Clone()
	resp, err := r.client.Do(hr)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a struct{ Status, Key, Reason, Challenge string }
	if err := json.Unmarshal(raw, &a); err != nil {
		r.t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, raw)
	}
	return answer{code: resp.StatusCode, header: resp.Header, raw: raw, status: a.Status, key: a.Key, reason: a.Reason, challenge: a.Challenge}
}

// published returns INTAKE_IN's messages of one integration, in order.
func (r *rig) published(integration string) []*jetstream.RawStreamMsg {
	r.t.Helper()
	ctx := context.Background()
	s, err := r.js.Stream(ctx, envelope.StreamIn)
	if err != nil {
		r.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			r.t.Fatalf("seq %d: %v", seq, err)
		}
		if m.Header.Get(envelope.HeaderIntegration) == integration {
			out = append(out, m)
		}
	}
	return out
}

func (r *rig) integration(name string) config.Integration {
	in, ok := r.cfg.Integration(name)
	if !ok {
		r.t.Fatalf("no integration %s", name)
	}
	return in
}

// sign signs with Intake's own signer (for providers without an official
// Go library, and for cases the libraries cannot produce).
func (r *rig) sign(name string, secretIndex int, m provider.Message) request {
	r.t.Helper()
	cfg := r.integration(name).Config
	h, err := provider.SignMessage(cfg, secretIndex, m)
	if err != nil {
		r.t.Fatal(err)
	}
	return request{header: h, body: m.Body}
}

// accepted is a delivery that must be published once.
type accepted struct {
	name                         string
	req                          request
	key, typ, objectID, objectVV string // objectVV: Intake-Object-Version as published
	secretIndex                  int
}

// rejected is a delivery that must be refused and publish nothing.
type rejected struct {
	name   string
	req    request
	code   int
	reason string
}

// checkProvider posts every rejection (nothing may be published), then
// every accepted delivery (published once, with its identity headers), then
// each accepted delivery again (answered duplicate, nothing new published).
func (r *rig) checkProvider(t *testing.T, integration string, acc []accepted, rej []rejected) {
	t.Helper()
	m := r.metrics
	before := len(r.published(integration))
	for _, tt := range rej {
		reasonBefore := testutil.ToFloat64(m.Rejected.WithLabelValues(integration, tt.reason))
		a := r.post(integration, tt.req)
		if a.code != tt.code || a.status != "rejected" || a.reason != tt.reason || a.key != "" {
			t.Errorf("%s: answered %d %s, want %d rejected %s", tt.name, a.code, a.raw, tt.code, tt.reason)
		}
		if got := testutil.ToFloat64(m.Rejected.WithLabelValues(integration, tt.reason)) - reasonBefore; got != 1 {
			t.Errorf("%s: rejected{%s} grew by %v, want 1", tt.name, tt.reason, got)
		}
	}
	if got := len(r.published(integration)); got != before {
		t.Fatalf("rejections published %d messages", got-before)
	}

	for _, tt := range acc {
		verified := testutil.ToFloat64(m.Verified.WithLabelValues(integration))
		secret := testutil.ToFloat64(m.SecretMatched.WithLabelValues(integration, strconv.Itoa(tt.secretIndex)))
		a := r.post(integration, tt.req)
		if a.code != http.StatusOK || a.status != "accepted" || a.key != tt.key {
			t.Fatalf("%s: answered %d %s, want 200 accepted %s", tt.name, a.code, a.raw, tt.key)
		}
		if testutil.ToFloat64(m.Verified.WithLabelValues(integration))-verified != 1 ||
			testutil.ToFloat64(m.SecretMatched.WithLabelValues(integration, strconv.Itoa(tt.secretIndex)))-secret != 1 {
			t.Errorf("%s: verified or secret_matched{index=%d} did not grow", tt.name, tt.secretIndex)
		}
		msgs := r.published(integration)
		last := msgs[len(msgs)-1]
		if len(msgs) != before+1 || !bytes.Equal(last.Data, tt.req.body) {
			t.Fatalf("%s: %d new messages, body %q; want one with the raw body", tt.name, len(msgs)-before, last.Data)
		}
		before++
		for h, want := range map[string]string{
			envelope.HeaderKey: tt.key, envelope.HeaderTenant: "acme", envelope.HeaderEventType: tt.typ,
			envelope.HeaderObjectID: tt.objectID, envelope.HeaderObjectVersion: tt.objectVV,
			envelope.HeaderPayloadSHA256: envelope.PayloadSHA256(tt.req.body),
		} {
			if got := last.Header.Get(h); got != want {
				t.Errorf("%s: %s = %q, want %q", tt.name, h, got, want)
			}
		}
		if want := envelope.SubjectIn(integration, tt.typ); last.Subject != want {
			t.Errorf("%s: subject %q, want %q", tt.name, last.Subject, want)
		}
	}
	for _, tt := range acc {
		if a := r.post(integration, tt.req); a.code != http.StatusOK || a.status != "duplicate" || a.key != tt.key {
			t.Errorf("%s again: answered %d %s, want 200 duplicate", tt.name, a.code, a.raw)
		}
	}
	if got := len(r.published(integration)); got != before {
		t.Fatalf("duplicates published %d messages", got-before)
	}
}

// signWith signs as a sender holding secret would.
func signWith(t *testing.T, providerName, secret string, m provider.Message) request {
	t.Helper()
	h, err := provider.SignMessage(provider.Config{Provider: providerName, Secrets: []string{secret}}, 0, m)
	if err != nil {
		t.Fatal(err)
	}
	return request{header: h, body: m.Body}
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// without returns req with a header removed.
func without(req request, name string) request {
	h := req.header.Clone()
	h.Del(name)
	return request{header: h, body: req.body}
}

// setHeader returns req with a header replaced.
func setHeader(req request, name, value string) request {
	h := req.header.Clone()
	h.Set(name, value)
	return request{header: h, body: req.body}
}

// tampered returns req with one byte of the body changed.
func tampered(req request) request {
	b := append([]byte(nil), req.body...)
	b[len(b)/2] ^= 1
	return request{header: req.header, body: b}
}

func TestEveryProviderThroughHTTP(t *testing.T) {
	// The per-address limit off: every case comes from one address, dozens
	// of rejections and repeats (whose token is not given back, issue 30
	// item 4); TestClientAddressLimit is its test.
	r := startRigYAML(t, "ingress: {client_rate_limit: {per_second: -1}}\n"+fmt.Sprintf(testIngressY, whpk), 0)

	t.Run("standard", func(t *testing.T) {
		ref, _ := standardwebhooks.NewWebhook(whsecNew)
		wrong, _ := standardwebhooks.NewWebhook(whsecWrong)
		sign := func(w *standardwebhooks.Webhook, id string, at time.Time, body string) request {
			sig, err := w.Sign(id, at, []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			return request{header: hdr("webhook-id", id, "webhook-timestamp", strconv.FormatInt(at.Unix(), 10), "webhook-signature", sig),
				body: []byte(body)}
		}
		body := `{"type":"invoice.paid","data":{"id":"in_1"}}`
		now := time.Now()
		good := sign(ref, "msg_std_1", now, body)
		wrongSig := sign(wrong, "msg_std_1", now, body)
		// The receiver holds the whpk_ public key; the sender signs with whsk_.
		ed := signWith(t, "standard", whsk, provider.Message{ID: "msg_std_ed", Body: []byte(body), Time: now})
		several := sign(ref, "msg_std_2", now, body)
		several.header.Set("webhook-signature", wrongSig.header.Get("webhook-signature")+" "+several.header.Get("webhook-signature"))
		r.checkProvider(t, "std", []accepted{
			{name: "signed by the reference library", req: good, key: "std/main/msg_std_1", typ: "invoice.paid", secretIndex: 1},
			{name: "v1a ed25519", req: ed, key: "std/main/msg_std_ed", typ: "invoice.paid", secretIndex: 2},
			{name: "several signatures, one matches", req: several, key: "std/main/msg_std_2", typ: "invoice.paid", secretIndex: 1},
		}, []rejected{
			{"tampered body", tampered(good), 401, "bad_signature"},
			{"wrong secret", wrongSig, 401, "bad_signature"},
			{"stale", sign(ref, "msg_std_1", now.Add(-6*time.Minute), body), 401, "timestamp"},
			{"future", sign(ref, "msg_std_1", now.Add(6*time.Minute), body), 401, "timestamp"},
			{"timestamp not an integer", setHeader(good, "webhook-timestamp", strconv.FormatInt(now.Unix(), 10)+".0"), 401, "timestamp"},
			{"missing webhook-id", without(good, "webhook-id"), 401, "missing_header"},
			{"missing webhook-signature", without(good, "webhook-signature"), 401, "missing_header"},
		})
	})

	t.Run("svix", func(t *testing.T) {
		ref, _ := svix.NewWebhook(whsecOld)
		body := `{"type":"payment.created","data":{}}`
		now := time.Now()
		sign := func(id string, at time.Time) request {
			sig, err := ref.Sign(id, at, []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			return request{header: hdr("svix-id", id, "svix-timestamp", strconv.FormatInt(at.Unix(), 10), "svix-signature", sig), body: []byte(body)}
		}
		good := sign("msg_svx_1", now)
		fallback := sign("msg_svx_2", now)
		fallback.header = hdr("webhook-id", "msg_svx_2", "webhook-timestamp", good.header.Get("svix-timestamp"),
			"webhook-signature", fallback.header.Get("svix-signature"))
		r.checkProvider(t, "svx", []accepted{
			{name: "signed by the svix library", req: good, key: "svx//msg_svx_1", typ: "payment.created", secretIndex: 0},
			{name: "webhook-* fallback", req: fallback, key: "svx//msg_svx_2", typ: "payment.created", secretIndex: 0},
		}, []rejected{
			{"tampered body", tampered(good), 401, "bad_signature"},
			{"stale", sign("msg_svx_1", now.Add(-10*time.Minute)), 401, "timestamp"},
			{"missing svix-id", without(good, "svix-id"), 401, "missing_header"},
		})
	})

	t.Run("stripe", func(t *testing.T) {
		body := []byte(`{"id":"evt_str_1","object":"event","api_version":"` + stripego.APIVersion +
			`","created":1700000123,"type":"customer.updated","data":{"object":{"id":"cus_1","object":"customer"}}}`)
		now := time.Now()
		sign := func(secret string, at time.Time) request {
			p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
			return request{header: hdr("Stripe-Signature", p.Header), body: body}
		}
		good := sign(stripeNew, now)
		old := sign(stripeOld, now)
		rotated := request{header: hdr("Stripe-Signature", good.header.Get("Stripe-Signature")+",v1="+
			strings.SplitN(old.header.Get("Stripe-Signature"), "v1=", 2)[1]), body: body}
		noID := []byte(`{"object":"event","type":"x"}`)
		r.checkProvider(t, "str", []accepted{
			{name: "signed by stripe-go", req: good, key: "str//evt_str_1", typ: "customer.updated",
				objectID: "cus_1", objectVV: "1700000123", secretIndex: 1},
		}, []rejected{
			{"tampered body", tampered(good), 401, "bad_signature"},
			{"wrong secret", sign("whsec_wrong", now), 401, "bad_signature"},
			{"stale", sign(stripeNew, now.Add(-6*time.Minute)), 401, "timestamp"},
			{"t not an integer", setHeader(good, "Stripe-Signature", "t=soon,"+strings.SplitN(good.header.Get("Stripe-Signature"), ",", 2)[1]), 401, "timestamp"},
			{"missing header", without(good, "Stripe-Signature"), 401, "missing_header"},
			{"verified but no event id", func() request {
				p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: noID, Secret: stripeNew, Timestamp: now})
				return request{header: hdr("Stripe-Signature", p.Header), body: noID}
			}(), 400, "malformed"},
		})
		// The old secret still verifies during rotation: the same event
		// arrives once more, signed with both (a duplicate now).
		if a := r.post("str", rotated); a.status != "duplicate" {
			t.Errorf("signed with old and new secrets: %d %s", a.code, a.raw)
		}
		if a := r.post("str", old); a.status != "duplicate" {
			t.Errorf("signed with the old secret: %d %s", a.code, a.raw)
		}
		if got := testutil.ToFloat64(r.metrics.SecretMatched.WithLabelValues("str", "0")); got != 2 {
			t.Errorf("secret_matched{index=0} = %v, want 2 (the old secret matched twice)", got)
		}
	})

	t.Run("github", func(t *testing.T) {
		body := []byte(`{"zen":"Design for failure.","hook_id":1}`)
		good := r.sign("gh", 1, provider.Message{ID: "gh-delivery-1", Type: "push", Body: body, Time: time.Now()})
		ping := r.sign("gh", 1, provider.Message{ID: "gh-delivery-ping", Type: "ping", Body: body, Time: time.Now()})
		sha1Only := without(good, "X-Hub-Signature-256")
		sha1Only.header.Set("X-Hub-Signature", "sha1=0000000000000000000000000000000000000000")
		r.checkProvider(t, "gh", []accepted{
			{name: "push", req: good, key: "gh//gh-delivery-1", typ: "push", secretIndex: 1},
			{name: "ping is published", req: ping, key: "gh//gh-delivery-ping", typ: "ping", secretIndex: 1},
		}, []rejected{
			{"tampered body", tampered(good), 401, "bad_signature"},
			{"wrong secret", signWith(t, "github", wrongSecret, provider.Message{ID: "gh-delivery-1", Type: "push", Body: body, Time: time.Now()}),
				401, "bad_signature"},
			{"SHA-1 only", sha1Only, 401, "missing_header"},
			{"missing delivery id", without(good, "X-GitHub-Delivery"), 401, "missing_header"},
		})
	})

	t.Run("shopify", func(t *testing.T) {
		at := time.Now()
		updated := at.Add(-time.Minute).UTC().Format(time.RFC3339)
		body := []byte(`{"id":450789469,"admin_graphql_api_id":"gid://shopify/Order/450789469","email":"bob@example.com","updated_at":"` + updated + `"}`)
		good := r.sign("shop", 1, provider.Message{ID: "shop-ev-1", Type: "orders/updated", Body: body, Time: at})
		version, err := envelope.ParseVersion(updated)
		if err != nil {
			t.Fatal(err)
		}
		future := []byte(`{"admin_graphql_api_id":"gid://shopify/Order/450789469","updated_at":"9999-12-31T23:59:59Z"}`)
		token := []byte(`eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJkZXN0IjoiaHR0cHM6Ly9hY21lLm15c2hvcGlmeS5jb20ifQ`)
		r.checkProvider(t, "shop", []accepted{
			{name: "order", req: good, key: "shop/" + allowedShop + "/shop-ev-1", typ: "orders/updated",
				objectID: "gid://shopify/Order/450789469", objectVV: strconv.FormatInt(version, 10), secretIndex: 1},
		}, []rejected{
			{"tampered body", tampered(good), 401, "bad_signature"},
			{"wrong secret", setHeader(good, "X-Shopify-Hmac-Sha256",
				signWith(t, "shopify", wrongSecret, provider.Message{ID: "shop-ev-1", Body: body, Time: at}).header.Get("X-Shopify-Hmac-Sha256")),
				401, "bad_signature"},
			{"shop not allowed", setHeader(good, "X-Shopify-Shop-Domain", "evil.myshopify.com"), 401, "account_not_allowed"},
			{"missing shop", without(good, "X-Shopify-Shop-Domain"), 401, "missing_header"},
			{"missing HMAC", without(good, "X-Shopify-Hmac-Sha256"), 401, "missing_header"},
			{"far-future updated_at", r.sign("shop", 1, provider.Message{ID: "shop-ev-2", Type: "orders/updated", Body: future, Time: at}),
				400, "bad_object_version"},
			{"a token's signed text", r.sign("shop", 1, provider.Message{ID: "chosen", Type: "shop/redact", Body: token, Time: at}),
				400, "malformed"},
		})
	})

	t.Run("slack", func(t *testing.T) {
		body := []byte(`{"type":"event_callback","team_id":"T1","event_id":"Ev0SLK1","event":{"type":"app_mention","text":"hi"}}`)
		now := time.Now()
		good := r.sign("slk", 1, provider.Message{Body: body, Time: now})
		stale := r.sign("slk", 1, provider.Message{Body: body, Time: now.Add(-301 * time.Second)})
		r.checkProvider(t, "slk", []accepted{
			{name: "event", req: good, key: "slk//Ev0SLK1", typ: "app_mention", secretIndex: 1},
		}, []rejected{
			{"tampered body", tampered(good), 401, "bad_signature"},
			{"wrong secret", signWith(t, "slack", wrongSecret, provider.Message{Body: body, Time: now}), 401, "bad_signature"},
			{"stale", stale, 401, "timestamp"},
			{"future", r.sign("slk", 1, provider.Message{Body: body, Time: now.Add(10 * time.Minute)}), 401, "timestamp"},
			{"timestamp not an integer", setHeader(good, "X-Slack-Request-Timestamp", "1e9"), 401, "timestamp"},
			{"missing timestamp", without(good, "X-Slack-Request-Timestamp"), 401, "missing_header"},
		})
	})

	t.Run("hmac", func(t *testing.T) {
		body := []byte(`{"id":"ord_evt_1","type":"order.shipped","order":{"id":"ord_1","version":7}}`)
		now := time.Now()
		good := r.sign("hm", 1, provider.Message{Body: body, Time: now})
		r.checkProvider(t, "hm", []accepted{
			{name: "sha512 base64 over {timestamp}.{body}", req: good, key: "hm//ord_evt_1", typ: "order.shipped",
				objectID: "ord_1", objectVV: "7", secretIndex: 1},
		}, []rejected{
			{"tampered body", tampered(good), 401, "bad_signature"},
			{"timestamp changed", setHeader(good, "X-Timestamp", strconv.FormatInt(now.Unix()-1, 10)), 401, "bad_signature"},
			{"stale", r.sign("hm", 1, provider.Message{Body: body, Time: now.Add(-6 * time.Minute)}), 401, "timestamp"},
			{"missing timestamp", without(good, "X-Timestamp"), 401, "missing_header"},
			{"malformed JSON", r.sign("hm", 1, provider.Message{Body: []byte(`{"id":`), Time: now}), 400, "malformed"},
		})
	})
}

func TestSlackChallengeIsAnsweredNotPublished(t *testing.T) {
	r := startRig(t)
	body := []byte(`{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	good := r.sign("slk", 0, provider.Message{Body: body, Time: time.Now()})

	a := r.post("slk", good)
	if a.code != http.StatusOK || a.challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" ||
		strings.TrimSpace(string(a.raw)) != `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}` {
		t.Fatalf("challenge answered %d %s", a.code, a.raw)
	}
	if a.header.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type %q", a.header.Get("Content-Type"))
	}
	// The signature is checked first: a forged handshake is refused.
	if a := r.post("slk", tampered(good)); a.code != http.StatusUnauthorized || a.challenge != "" {
		t.Fatalf("forged challenge answered %d %s", a.code, a.raw)
	}
	if got := len(r.published("slk")); got != 0 {
		t.Fatalf("handshakes published %d messages", got)
	}
	if got := testutil.ToFloat64(r.metrics.Handshakes.WithLabelValues("slk")); got != 1 {
		t.Errorf("handshakes_total = %v, want 1", got)
	}
}

func TestRateLimitAnswers429WithRetryAfter(t *testing.T) {
	r := startRig(t)
	body := []byte(`{}`)
	delivery := func(id string) request { // distinct events: distinct bodies
		return r.sign("limited", 0, provider.Message{ID: id, Type: "push", Body: []byte(`{"id":"` + id + `"}`), Time: time.Now()})
	}
	// A burst of 2, refilling once in ~17 minutes: two pass, the third waits.
	for i := range 2 {
		if a := r.post("limited", delivery(fmt.Sprintf("d-%d", i))); a.code != http.StatusOK {
			t.Fatalf("request %d within the burst: %d %s", i, a.code, a.raw)
		}
	}
	// A repeat of a delivery just published needs no budget: the answer is
	// known (issue 30, item 4).
	if a := r.post("limited", delivery("d-0")); a.code != http.StatusOK || a.status != "duplicate" {
		t.Fatalf("a repeat over the limit: %d %s, want 200 duplicate", a.code, a.raw)
	}
	a := r.post("limited", delivery("d-2"))
	if a.code != http.StatusTooManyRequests || a.reason != "rate_limited" {
		t.Fatalf("over the limit: %d %s, want 429 rate_limited", a.code, a.raw)
	}
	secs, err := strconv.Atoi(a.header.Get("Retry-After"))
	if err != nil || secs < 1 {
		t.Fatalf("Retry-After = %q, want whole seconds ≥ 1", a.header.Get("Retry-After"))
	}
	// Unsigned requests do not reach the integration's limit: they are
	// refused by the signature check (issue 14), never spending it.
	if a := r.post("limited", request{header: http.Header{}, body: body}); a.code != http.StatusUnauthorized {
		t.Fatalf("unsigned request over the limit: %d, want 401", a.code)
	}
	if got := len(r.published("limited")); got != 2 {
		t.Fatalf("published %d messages, want 2 (the repeat is answered duplicate)", got)
	}
	// Other integrations keep their own budget.
	if a := r.post("gh", request{header: http.Header{}, body: body}); a.code != http.StatusUnauthorized {
		t.Fatalf("another integration: %d, want 401", a.code)
	}
}

func TestLimitsAndUnknownIntegration(t *testing.T) {
	r := startRig(t)
	big := []byte(`{"type":"x","pad":"` + strings.Repeat("p", 100) + `"}`)
	req := r.sign("small", 0, provider.Message{ID: "msg_big", Body: big, Time: time.Now()})
	if a := r.post("small", req); a.code != http.StatusRequestEntityTooLarge || a.reason != "too_large" {
		t.Fatalf("oversized body: %d %s", a.code, a.raw)
	}
	if a := r.post("nope", req); a.code != http.StatusNotFound || a.reason != "unknown_integration" {
		t.Fatalf("unknown integration: %d %s", a.code, a.raw)
	}
	if got := len(r.published("small")); got != 0 {
		t.Fatalf("published %d", got)
	}
	// Answers never echo input: no body byte, header value or id appears
	// in a rejection.
	a := r.post("std", request{header: hdr("webhook-id", "msg_<script>", "webhook-timestamp", "1", "webhook-signature", "v1,x"), body: big})
	if strings.Contains(string(a.raw), "script") || strings.Contains(string(a.raw), "pad") {
		t.Fatalf("rejection echoes input: %s", a.raw)
	}
}

// TestInvisibleCharactersInIDsAreRefused: an id that differs from another
// only by characters that show as nothing (a zero-width space or joiner, a
// BOM, a soft hyphen) would read as that other id in `intake events` and the
// console; it is refused before anything is published.
func TestInvisibleCharactersInIDsAreRefused(t *testing.T) {
	r := startRig(t)
	for _, id := range []string{"msg\u200b_zw", "msg\u200d_zw", "\ufeffmsg_zw", "msg\u00ad_zw", "msg\u2060_zw"} {
		a := r.post("std", r.sign("std", 0, provider.Message{ID: id, Body: []byte(`{"n":1}`), Time: time.Now()}))
		if a.code != http.StatusBadRequest {
			t.Errorf("id %q: %d %s, want 400", id, a.code, a.raw)
		}
	}
	if got := len(r.published("std")); got != 0 {
		t.Fatalf("published %d messages, want none", got)
	}
	if a := r.post("std", r.sign("std", 0, provider.Message{ID: "msg_zw", Body: []byte(`{"n":1}`), Time: time.Now()})); a.code != http.StatusOK {
		t.Fatalf("the visible id: %d %s, want 200", a.code, a.raw)
	}
}
