package provider

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	svix "github.com/svix/svix-webhooks/go"
)

// TestMorePresets: each preset verifies a delivery signed as its sender's
// documentation (or SDK, where named) says, refuses it tampered, and reads
// the id and type where the sender puts them; a split preset's items are
// checked too.
func TestMorePresets(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	rfc := now.UTC().Format(time.RFC3339)
	b64 := base64.StdEncoding.EncodeToString

	sgKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const sgBody = `[{"email":"a@example.com","timestamp":1700000000,"event":"delivered","sg_event_id":"sg-1"},{"email":"b@example.com","timestamp":1700000000,"event":"open","sg_event_id":"sg-2"}]`
	sgTS := strconv.FormatInt(now.Unix(), 10)
	digest := sha256.Sum256([]byte(sgTS + sgBody))
	sgSig, err := ecdsa.SignASN1(rand.Reader, sgKey, digest[:])
	if err != nil {
		t.Fatal(err)
	}

	std, err := standardwebhooks.NewWebhook(specSecret)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := svix.NewWebhook(specSecret)
	if err != nil {
		t.Fatal(err)
	}
	const svBody = `{"type":"email.delivered","data":{"email_id":"e-1"}}`
	stdSig, _ := std.Sign("msg_std_1", now, []byte(svBody))
	svSig, _ := sv.Sign("msg_svix_1", now, []byte(svBody))
	unix := strconv.FormatInt(now.Unix(), 10)

	const zdBody = `{"id":"01HZD","type":"zen:event-type:ticket.created","detail":{"id":"35"}}`
	const boxBody = `{"type":"webhook_event","id":"e-box","trigger":"FILE.UPLOADED","source":{"id":"1","type":"file"}}`
	const jiraBody = `{"timestamp":1700000000000,"webhookEvent":"jira:issue_created","issue":{"id":"10001"}}`
	const segBody = `{"messageId":"ajs-1","type":"track","event":"Signed Up"}`
	const pdBody = `{"event":{"id":"01DEN","event_type":"incident.triggered","data":{}}}`
	const qbBody = `[{"specversion":"1.0","id":"88cd52f3-4ff1-4ff6-b41f-c4be1b6b4a41","source":"intuit.dsnBgbseX","type":"qbo.customer.created.v1","time":"2023-11-14T22:13:20Z"}]`
	const a0Body = `[{"log_id":"90020231114","data":{"type":"s","date":"2023-11-14T22:13:20.000Z"}},{"log_id":"90020231115","data":{"type":"f"}}]`

	for _, tt := range []struct {
		name, provider, secret, body string
		header                       http.Header
		want                         Identity
		items                        []Item // split presets: the items' ids and types
	}{
		{name: "sendgrid: ECDSA over {timestamp}{body}, split by sg_event_id", provider: "sendgrid", secret: pemKey(t, &sgKey.PublicKey), body: sgBody,
			header: hdr("X-Twilio-Email-Event-Webhook-Signature", b64(sgSig), "X-Twilio-Email-Event-Webhook-Timestamp", sgTS),
			items:  []Item{{ID: "sg-1", Type: "delivered"}, {ID: "sg-2", Type: "open"}}},
		{name: "auth0: the Authorization token, split by log_id", provider: "auth0", secret: "a0-token", body: a0Body,
			header: hdr("Authorization", "a0-token"), items: []Item{{ID: "90020231114", Type: "s"}, {ID: "90020231115", Type: "f"}}},
		{name: "quickbooks: base64 of the body, split by id", provider: "quickbooks", secret: "verifier-token", body: qbBody,
			header: hdr("intuit-signature", b64(macOf(sha256.New, "verifier-token", qbBody))),
			items:  []Item{{ID: "88cd52f3-4ff1-4ff6-b41f-c4be1b6b4a41", Type: "qbo.customer.created.v1"}}},
		{name: "jira: sha256= hex, X-Atlassian-Webhook-Identifier", provider: "jira", secret: "jira-secret", body: jiraBody,
			header: hdr("X-Hub-Signature", "sha256="+hex.EncodeToString(macOf(sha256.New, "jira-secret", jiraBody)), "X-Atlassian-Webhook-Identifier", "1234"),
			want:   Identity{ID: "1234", Type: "jira:issue_created"}},
		{name: "zendesk: base64 of {timestamp}{body}", provider: "zendesk", secret: "zd-secret", body: zdBody,
			header: hdr("X-Zendesk-Webhook-Signature", b64(macOf(sha256.New, "zd-secret", rfc+zdBody)), "X-Zendesk-Webhook-Signature-Timestamp", rfc),
			want:   Identity{ID: "01HZD", Type: "zen:event-type:ticket.created"}},
		{name: "segment: sha1 hex of the body", provider: "segment", secret: "seg-secret", body: segBody,
			header: hdr("X-Signature", hex.EncodeToString(macOf(sha1.New, "seg-secret", segBody))), want: Identity{ID: "ajs-1", Type: "track"}},
		{name: "box: base64 of {body}{timestamp}, the primary key", provider: "box", secret: "box-primary", body: boxBody,
			header: hdr("BOX-SIGNATURE-PRIMARY", b64(macOf(sha256.New, "box-primary", boxBody+rfc)), "BOX-DELIVERY-TIMESTAMP", rfc, "BOX-DELIVERY-ID", "d-box-1"),
			want:   Identity{ID: "d-box-1", Type: "FILE.UPLOADED"}},
		{name: "pagerduty: v1= hex of the body", provider: "pagerduty", secret: "pd-secret", body: pdBody,
			header: hdr("X-PagerDuty-Signature", "v1="+hex.EncodeToString(macOf(sha256.New, "pd-secret", pdBody))), want: Identity{ID: "01DEN", Type: "incident.triggered"}},
		{name: "resend: signed by svix-webhooks' Go library", provider: "resend", secret: specSecret, body: svBody,
			header: svixHeader("msg_svix_1", unix, svSig), want: Identity{ID: "msg_svix_1", Type: "email.delivered"}},
		{name: "clerk: signed by svix-webhooks' Go library", provider: "clerk", secret: specSecret, body: svBody,
			header: svixHeader("msg_svix_1", unix, svSig), want: Identity{ID: "msg_svix_1", Type: "email.delivered"}},
		{name: "openai: signed by the Standard Webhooks library", provider: "openai", secret: specSecret, body: svBody,
			header: standardHeader("msg_std_1", unix, stdSig), want: Identity{ID: "msg_std_1", Type: "email.delivered"}},
		{name: "gitlab: Standard Webhooks, type X-Gitlab-Event", provider: "gitlab", secret: specSecret, body: svBody,
			header: func() http.Header {
				h := standardHeader("msg_std_1", unix, stdSig)
				h.Set("X-Gitlab-Event", "Push Hook")
				return h
			}(), want: Identity{ID: "msg_std_1", Type: "Push Hook"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Provider: tt.provider, Secrets: []string{tt.secret}, Tolerance: DefaultTolerance}
			v := newTestVerifier(t, cfg)
			ev, err := v.Verify(&Request{Header: tt.header, Body: []byte(tt.body), Now: now})
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if tt.items == nil && ev != tt.want {
				t.Fatalf("Verify = %+v, want %+v", ev, tt.want)
			}
			if _, err := v.Verify(&Request{Header: tt.header, Body: []byte(tt.body + " "), Now: now}); (err == nil) != (tt.provider == "auth0") {
				t.Fatalf("tampered: %v", err)
			}
			s, err := NewSplitter(cfg)
			if err != nil || (s != nil) != (tt.items != nil) {
				t.Fatalf("NewSplitter = %v, %v", s, err)
			}
			if s == nil {
				return
			}
			items, err := s.Split([]byte(tt.body), ev, nil)
			if err != nil || len(items) != len(tt.items) {
				t.Fatalf("Split = %+v, %v", items, err)
			}
			for i := range items {
				if items[i].ID != tt.items[i].ID || items[i].Type != tt.items[i].Type {
					t.Errorf("item %d = %s %s, want %s %s", i, items[i].ID, items[i].Type, tt.items[i].ID, tt.items[i].Type)
				}
			}
		})
	}

	// sendgrid-go's own vector (eventwebhook_test.go) verifies under the
	// preset; its payload is one object, which the preset's split refuses.
	cfg := Config{Provider: "sendgrid", Secrets: []string{sendgridPublicKey}, Tolerance: DefaultTolerance}
	ts, _ := strconv.ParseInt(sendgridTimestamp, 10, 64)
	ev, err := newTestVerifier(t, cfg).Verify(&Request{Body: []byte(sendgridPayload), Now: time.Unix(ts, 0),
		Header: hdr("X-Twilio-Email-Event-Webhook-Signature", sendgridSignature, "X-Twilio-Email-Event-Webhook-Timestamp", sendgridTimestamp)})
	if err != nil {
		t.Fatalf("sendgrid-go's vector: %v", err)
	}
	s, _ := NewSplitter(cfg)
	if _, err := s.Split([]byte(sendgridPayload), ev, nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("one object split: %v", err)
	}
}

// The vector of Square's SDKs' WebhooksHelper tests (square-go-sdk,
// square-nodejs-sdk, square-python-sdk: the same in each).
const (
	squareBody = `{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`
	squareSig  = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="
	squareKey  = "Ibxx_5AKakO-3qeNVR61Dw"
	squareURL  = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9"
)

func TestPublicURLPresets(t *testing.T) {
	sq := newTestVerifier(t, Config{Provider: "square", Secrets: []string{"old", squareKey}, PublicURL: squareURL, Tolerance: DefaultTolerance})
	h := hdr("X-Square-Hmacsha256-Signature", squareSig)
	ev, err := sq.Verify(&Request{Header: h, Body: []byte(squareBody)})
	if want := (Identity{ID: "ac3ac95b-f97d-458c-a6e6-18981597e05f", Type: "webhooks.test_notification", SecretIndex: 1}); err != nil || ev != want {
		t.Fatalf("Square's vector: %+v, %v", ev, err)
	}
	// Another URL (a Host header, a proxy's) is another signed text.
	other := newTestVerifier(t, Config{Provider: "square", Secrets: []string{squareKey}, PublicURL: squareURL + "/", Tolerance: DefaultTolerance})
	if _, err := other.Verify(&Request{Header: h, Body: []byte(squareBody)}); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("another public_url: %v", err)
	}

	// HubSpot v3 as its documentation describes: base64 HMAC-SHA256 of
	// method + URI + body + timestamp (ms).
	now := time.UnixMilli(1_700_000_000_123)
	const hsURL = "https://hooks.example.com/webhooks/hubspot"
	const hsBody = `[{"eventId":1001,"subscriptionId":7,"portalId":62515,"occurredAt":1700000000000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123,"changeSource":"CRM"},{"eventId":1002,"subscriptionType":"contact.deletion","objectId":124}]`
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	cfg := Config{Provider: "hubspot", Secrets: []string{"hs-client-secret"}, PublicURL: hsURL, Tolerance: DefaultTolerance}
	hs := newTestVerifier(t, cfg)
	hh := hdr("X-HubSpot-Signature-v3", base64.StdEncoding.EncodeToString(macOf(sha256.New, "hs-client-secret", "POST"+hsURL+hsBody+ms)),
		"X-HubSpot-Request-Timestamp", ms)
	ev, err = hs.Verify(&Request{Header: hh, Body: []byte(hsBody), Now: now})
	if err != nil {
		t.Fatalf("HubSpot: %v", err)
	}
	s, _ := NewSplitter(cfg)
	items, err := s.Split([]byte(hsBody), ev, nil)
	if err != nil || len(items) != 2 || items[0].ID != "1001" || items[1].Type != "contact.deletion" {
		t.Fatalf("HubSpot items: %+v, %v", items, err)
	}
	if _, err := hs.Verify(&Request{Header: hh, Body: []byte(hsBody), Now: now.Add(6 * time.Minute)}); !errors.Is(err, ErrTimestamp) {
		t.Fatalf("stale: %v", err)
	}

	for _, tt := range []struct {
		name   string
		cfg    Config
		errHas string
	}{
		{"square without public_url", Config{Provider: "square", Secrets: []string{"k"}}, "{url} needs public_url"},
		{"public_url unused", Config{Provider: "hmac", Secrets: []string{"k"}, HMAC: HMACConfig{Header: "X-S"}, EventID: Field{Field: "id"}, PublicURL: "https://a.example/x"}, "does not sign {url}"},
		{"public_url on stripe", Config{Provider: "stripe", Secrets: []string{"whsec_x"}, PublicURL: "https://a.example/x"}, "public_url: only for"},
		{"relative", Config{Provider: "square", Secrets: []string{"k"}, PublicURL: "/webhooks/square"}, "public_url: must start with https:// or http://"},
		{"upper-case scheme", Config{Provider: "square", Secrets: []string{"k"}, PublicURL: "HTTPS://a.example/x"}, "in lowercase"},
		{"a fragment", Config{Provider: "square", Secrets: []string{"k"}, PublicURL: "https://a.example/x#y"}, "public_url"},
		{"user info", Config{Provider: "square", Secrets: []string{"k"}, PublicURL: "https://u:p@a.example/x"}, "public_url"},
		{"a brace", Config{Provider: "square", Secrets: []string{"k"}, PublicURL: "https://a.example/{body}"}, "public_url"},
		{"a space", Config{Provider: "square", Secrets: []string{"k"}, PublicURL: "https://a.example/a b"}, "public_url"},
	} {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: %v, want it to name %q", tt.name, err, tt.errHas)
		}
	}
}

// FuzzPublicURL: an accepted public_url is printable ASCII without braces,
// an absolute http(s) URL, and {url} expands to it byte for byte, so the
// template's placeholders stay what parseTemplate sees.
func FuzzPublicURL(f *testing.F) {
	f.Add(squareURL)
	f.Add("https://a.example/x?y={body}")
	f.Add("http://[::1]:80/a%20b")
	f.Fuzz(func(t *testing.T, u string) {
		if err := checkPublicURL(u); err != nil || u == "" {
			return
		}
		if strings.ContainsAny(u, "{} #") || !(strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://")) {
			t.Fatalf("accepted %q", u)
		}
		got, err := expandRequestPlaceholders("hmac.template", "{method}{url}{body}", u)
		if err != nil || got != "POST"+u+"{body}" {
			t.Fatalf("expanded %q, %v", got, err)
		}
		if _, err := parseTemplate(got); err != nil {
			t.Fatalf("parse %q: %v", got, err)
		}
	})
}

// TestSignMessageRequestURL: intake send's signer writes {url}, {method}
// and Twilio's form signature as the verifiers read them.
func TestSignMessageRequestURL(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		cfg  Config
		body string
	}{
		{Config{Provider: "square", Secrets: []string{squareKey}, PublicURL: squareURL}, `{"event_id":"evt_sq","type":"payment.updated"}`},
		{Config{Provider: "hmac", Secrets: []string{"k"}, PublicURL: squareURL, EventID: Field{Field: "id"},
			HMAC: HMACConfig{Header: "X-Sig", Template: "{method}{url}{body}"}}, `{"id":"evt_m"}`},
		{Config{Provider: "twilio", Secrets: []string{twilioToken}, PublicURL: twilioURL}, "MessageSid=SM1&MessageStatus=delivered"},
	} {
		h, err := SignMessage(tt.cfg, 0, Message{ID: "evt_x", Body: []byte(tt.body), Time: now})
		if err != nil {
			t.Fatalf("%s: %v", tt.cfg.Provider, err)
		}
		if _, err := newTestVerifier(t, tt.cfg).Verify(&Request{Header: h, Body: []byte(tt.body), Now: now}); err != nil {
			t.Errorf("%s: %v", tt.cfg.Provider, err)
		}
	}
}
