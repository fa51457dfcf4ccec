package provider

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"
)

const (
	githubSecret      = "github-webhook-secret-1"
	githubOtherSecret = "github-webhook-secret-2"
)

func githubSig(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func githubHeader(sig, delivery, event string) http.Header {
	return hdr("X-Hub-Signature-256", sig, "X-GitHub-Delivery", delivery, "X-GitHub-Event", event)
}

// GitHub's documented example (docs.github.com, "Validating webhook
// deliveries"): secret "It's a Secret to Everybody", payload "Hello, World!".
func TestGitHubDocsVector(t *testing.T) {
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	v := newTestVerifier(t, Config{Provider: "github", Secrets: []string{"It's a Secret to Everybody"}})
	ev, err := v.Verify(&Request{Header: githubHeader(want, "d-1", "push"), Body: []byte("Hello, World!")})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if ev != (Identity{ID: "d-1", Type: "push"}) {
		t.Fatalf("event = %+v", ev)
	}
	if got := githubSig("It's a Secret to Everybody", "Hello, World!"); got != want {
		t.Fatalf("test signer = %s, want the documented %s", got, want)
	}
}

func TestGitHubVerify(t *testing.T) {
	const body = `{"action":"opened","issue":{"id":42,"updated_at":"2024-01-01T00:00:00Z"}}`
	good := githubSig(githubSecret, body)
	other := githubSig(githubOtherSecret, body)
	sha1Sig := func() string {
		m := hmac.New(sha1.New, []byte(githubSecret))
		m.Write([]byte(body))
		return "sha1=" + hex.EncodeToString(m.Sum(nil))
	}()
	h := githubHeader(good, "72d3162e-cc78-11e3-81ab-4c9367dc0958", "issues")
	want := Identity{ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Type: "issues"}

	runVerifyCases(t, Config{Provider: "github", Secrets: []string{githubSecret}}, body, time.Unix(1_700_000_000, 0), []verifyCase{
		{name: "valid", header: h, want: want},
		{name: "with the legacy SHA-1 header too", header: with(h, "X-Hub-Signature", sha1Sig), want: want},
		{name: "uppercase hex", header: with(h, "X-Hub-Signature-256", "sha256="+strings.ToUpper(strings.TrimPrefix(good, "sha256="))), want: want},
		{name: "ping is an event", header: with(h, "X-GitHub-Event", "ping"), want: Identity{ID: want.ID, Type: "ping"}},
		{name: "no event header: no type", header: with(h, "X-GitHub-Event", ""), want: Identity{ID: want.ID}},
		{name: "rotated: second secret", cfg: func(c *Config) { c.Secrets = []string{githubOtherSecret, githubSecret} },
			header: h, want: Identity{ID: want.ID, Type: "issues", SecretIndex: 1}},
		{name: "wrong secret", header: with(h, "X-Hub-Signature-256", other), wantErr: ErrBadSignature},
		{name: "tampered body", body: strp(strings.Replace(body, "42", "43", 1)), header: h, wantErr: ErrBadSignature},
		{name: "SHA-1 only", header: with(with(h, "X-Hub-Signature-256", ""), "X-Hub-Signature", sha1Sig),
			wantErr: ErrMissingHeader, errHas: "SHA-1"},
		{name: "missing signature", header: with(h, "X-Hub-Signature-256", ""), wantErr: ErrMissingHeader, errHas: "X-Hub-Signature-256"},
		{name: "missing delivery id", header: with(h, "X-GitHub-Delivery", ""), wantErr: ErrMissingHeader, errHas: "X-Github-Delivery"},
		{name: "no sha256= prefix", header: with(h, "X-Hub-Signature-256", strings.TrimPrefix(good, "sha256=")), wantErr: ErrBadSignature},
		{name: "sha1= label on a sha256 MAC", header: with(h, "X-Hub-Signature-256", "sha1="+strings.TrimPrefix(good, "sha256=")),
			wantErr: ErrBadSignature},
		{name: "truncated MAC", header: with(h, "X-Hub-Signature-256", good[:len(good)-2]), wantErr: ErrBadSignature},
		{name: "not hex", header: with(h, "X-Hub-Signature-256", "sha256="+strings.Repeat("g", 64)), wantErr: ErrBadSignature},
		{name: "several signatures are not a list", header: with(h, "X-Hub-Signature-256", other+","+good), wantErr: ErrBadSignature},
		{name: "form-encoded body is fine", body: strp("payload=%7B%7D"),
			header: with(h, "X-Hub-Signature-256", githubSig(githubSecret, "payload=%7B%7D")), want: want},
		{name: "object fields configured", cfg: func(c *Config) {
			c.ObjectID = Field{Field: "issue.id"}
			c.ObjectVersion = Field{Field: "issue.updated_at"}
		}, header: h, want: Identity{ID: want.ID, Type: "issues", ObjectID: "42", ObjectVersion: "2024-01-01T00:00:00Z"}},
		{name: "configured field on a non-JSON body", cfg: func(c *Config) { c.ObjectID = Field{Field: "issue.id"} },
			body: strp("payload=x"), header: with(h, "X-Hub-Signature-256", githubSig(githubSecret, "payload=x")), wantErr: ErrMalformed},
		{name: "event_id configured: delivery header not required", cfg: func(c *Config) { c.EventID = Field{Field: "issue.id"} },
			header: with(h, "X-GitHub-Delivery", ""), want: Identity{ID: "42", Type: "issues"}},
	})
}

func BenchmarkGitHubVerify(b *testing.B) {
	body := []byte(`{"action":"opened","issue":{"id":42,"number":7,"updated_at":"2024-01-01T00:00:00Z"},"repository":{"id":1}}`)
	v, err := New(Config{Provider: "github", Secrets: []string{githubSecret}})
	if err != nil {
		b.Fatal(err)
	}
	d := &Request{Header: githubHeader(githubSig(githubSecret, string(body)), "72d3162e-cc78-11e3-81ab-4c9367dc0958", "issues"), Body: body}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(d); err != nil {
			b.Fatal(err)
		}
	}
}
