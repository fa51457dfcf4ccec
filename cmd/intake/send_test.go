package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/provider"
)

// sendConfig has one integration per provider; the ed25519 one verifies
// with a whpk_ public key, so `send` needs the whsk_ key via --secret.
const sendConfig = `
integrations:
  - {name: std, provider: standard, tenant: t, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
  - {name: std-ed, provider: standard, tenant: t, secrets: ["%WHPK%"]}
  - {name: svx, provider: svix, tenant: t, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
  - {name: str, provider: stripe, tenant: t, secrets: ["whsec_old", "whsec_new"]}
  - {name: gh, provider: github, tenant: t, secrets: ["gh-secret"]}
  - {name: shop, provider: shopify, tenant: t, secrets: ["shop-secret"], allowed_shops: [acme.myshopify.com]}
  - {name: slk, provider: slack, tenant: t, secrets: ["slack-secret"]}
  - name: hm
    provider: hmac
    tenant: t
    secrets: ["hmac-secret"]
    hmac: {header: X-Sig, timestamp_header: X-Ts, template: "{id}.{timestamp}.{body}"}
    event_id: {header: X-Event-Id}
    event_type: {field: type}
  - {name: hm-field, provider: hmac, tenant: t, secrets: ["hmac-secret"], hmac: {header: X-Sig}, event_id: {field: meta.id}}
`

// TestSendSignsForEveryProvider runs `intake send` against a receiver that
// verifies with each integration's own verifier and checks the identity it
// reads: the id and type given on the command line.
func TestSendSignsForEveryProvider(t *testing.T) {
	seed := []byte("intake-send-test-ed25519-seed-00")
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	whsk := "whsk_" + base64.StdEncoding.EncodeToString(seed)
	path := filepath.Join(t.TempDir(), "intake.yaml")
	yaml := strings.Replace(sendConfig, "%WHPK%", "whpk_"+base64.StdEncoding.EncodeToString(pub), 1)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}

	got := make(chan provider.Identity, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, ok := cfg.Integration(strings.TrimPrefix(r.URL.Path, "/webhooks/"))
		if !ok {
			http.Error(w, `{"status":"rejected"}`, http.StatusNotFound)
			return
		}
		v, err := provider.New(in.Config)
		if err != nil {
			t.Error(err)
			return
		}
		body, _ := io.ReadAll(r.Body)
		ev, err := v.Verify(&provider.Request{Header: r.Header, Body: body, Now: time.Now()})
		if err != nil {
			http.Error(w, `{"status":"rejected","reason":"`+provider.Reason(err)+`"}`, http.StatusUnauthorized)
			return
		}
		got <- ev
		_, _ = io.WriteString(w, `{"status":"accepted"}`+"\n")
	}))
	t.Cleanup(srv.Close)

	for _, tt := range []struct {
		integration string
		args        []string
		wantType    string
		wantSecret  int
	}{
		{integration: "std", wantType: "order.created"},
		{integration: "std-ed", args: []string{"--secret", whsk}, wantType: "order.created"},
		{integration: "svx", wantType: "order.created"},
		{integration: "str", args: []string{"--secret-index", "1"}, wantType: "order.created", wantSecret: 1},
		{integration: "gh", wantType: "order.created"},
		{integration: "shop", wantType: "order.created"},
		{integration: "slk", wantType: "order.created"},
		{integration: "hm", wantType: "order.created"},
		{integration: "hm-field"},
	} {
		t.Run(tt.integration, func(t *testing.T) {
			out := &testenv.Buffer{}
			args := append([]string{"--config", path, "send", "--integration", tt.integration, "--url", srv.URL,
				"--id", "evt_send_1", "--type", "order.created"}, tt.args...)
			if err := runCLI(t, context.Background(), out, args...); err != nil {
				t.Fatalf("intake send: %v\n%s", err, out.String())
			}
			ev := <-got
			if ev.ID != "evt_send_1" || ev.Type != tt.wantType || ev.SecretIndex != tt.wantSecret {
				t.Fatalf("receiver read %+v, want id evt_send_1, type %q, secret %d", ev, tt.wantType, tt.wantSecret)
			}
		})
	}

	t.Run("public key cannot sign", func(t *testing.T) {
		out := &testenv.Buffer{}
		err := runCLI(t, context.Background(), out, "--config", path, "send", "--integration", "std-ed", "--url", srv.URL)
		if err == nil || !strings.Contains(err.Error(), "whsk_") {
			t.Fatalf("err = %v, want a hint to pass the whsk_ key", err)
		}
	})
}

// TestSendAgainHintIsTheSameDelivery: the "send it again" line is a command
// that, run as printed, sends the same delivery: it keeps --config, --url,
// --type and the id (issue 34 item 8), and the receiver sees the same body.
func TestSendAgainHintIsTheSameDelivery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "my config.yaml")
	const yaml = "integrations:\n  - {name: demo, provider: standard, tenant: acme, secrets: [\"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"]}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	bodies := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
		_, _ = io.WriteString(w, `{"status":"accepted"}`+"\n")
	}))
	t.Cleanup(srv.Close)

	send := func(args ...string) string {
		out := &testenv.Buffer{}
		if err := runCLI(t, context.Background(), out, args...); err != nil {
			t.Fatalf("intake %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	out := send("send", "--config", path, "--url", srv.URL, "--type", "invoice.paid")
	m := regexp.MustCompile(`send it again \(same delivery\):  go run \./cmd/intake (.*)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no again hint starting `go run ./cmd/intake` (a test binary is a go build):\n%s", out)
	}
	for _, want := range []string{"--config '" + path + "'", "--url " + srv.URL, "--type invoice.paid", "--integration demo", "--id evt_"} {
		if !strings.Contains(m[1], want) {
			t.Errorf("again hint %q lacks %q", m[1], want)
		}
	}
	// Run it as printed (the shell's quoting undone by hand: one quoted path).
	q := "'" + path + "'"
	before, after, _ := strings.Cut(m[1], q)
	args := append(append(strings.Fields(before), path), strings.Fields(after)...)
	send(args...)
	if first, again := <-bodies, <-bodies; first != again {
		t.Errorf("the hint sent another body:\n%s\n%s", first, again)
	}
}
