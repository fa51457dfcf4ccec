package ingress_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

const handshakesY = `
nats: {publish_timeout: 2s}
ingress: {client_rate_limit: {per_second: -1}}
integrations:
  - {name: tw, provider: twitch, tenant: acme, secrets: ["twitch-secret"]}
  - name: zm
    provider: hmac
    tenant: acme
    secrets: ["zoom-secret-token"]
    handshake: zoom
    hmac: {header: x-zm-signature, prefix: "v0=", template: "v0:{timestamp}:{body}", timestamp_header: x-zm-request-timestamp}
    event_id: {field: payload.object.uuid}
    event_type: {field: event}
  - {name: ok, provider: okta, tenant: acme, secrets: ["okta-secret"]}
  - name: dbx
    provider: hmac
    tenant: acme
    secrets: ["dropbox-app-secret"]
    handshake: dropbox
    hmac: {header: X-Dropbox-Signature}
    event_id: {field: id}
  - {name: plain, provider: github, tenant: acme, secrets: ["gh"]}
  - {name: gr, provider: token, tenant: acme, secrets: ["graph-token"], handshake: graph, event_id: {field: id}}
`

func (r *rig) get(integration, query string, h http.Header) (int, http.Header, string) {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodGet, r.base+"/webhooks/"+integration+query, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header = h
	resp, err := r.client.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func (r *rig) postRaw(integration string, req request) (int, http.Header, string) {
	r.t.Helper()
	hr, err := http.NewRequest(http.MethodPost, r.base+"/webhooks/"+integration, bytesReader(req.body))
	if err != nil {
		r.t.Fatal(err)
	}
	hr.Header = req.header.Clone()
	resp, err := r.client.Do(hr)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestHandshakes: Twitch's and Zoom's verified POST handshakes, Okta's and
// Dropbox's GET, Microsoft Graph's unsigned POST, each answered in its
// sender's shape and never published.
func TestHandshakes(t *testing.T) {
	r := startRigYAML(t, handshakesY, 0)

	t.Run("twitch", func(t *testing.T) {
		body := `{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","type":"channel.follow","version":"2"}}`
		id, ts := "e76c6bd4-55c9-4987-8304-da1588d8988b", time.Now().UTC().Format(time.RFC3339Nano)
		req := request{header: hdr("Twitch-Eventsub-Message-Id", id, "Twitch-Eventsub-Message-Timestamp", ts,
			"Twitch-Eventsub-Message-Type", "webhook_callback_verification",
			"Twitch-Eventsub-Message-Signature", "sha256="+hexMAC(sha256.New, "twitch-secret", id+ts+body)), body: []byte(body)}
		code, h, got := r.postRaw("tw", req)
		if code != 200 || got != "pogchamp-kappa-360noscope-vohiyo" || h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("answered %d %q %v", code, got, h)
		}
		if code, _, got := r.postRaw("tw", tampered(req)); code != 401 {
			t.Fatalf("a forged verification answered %d %q", code, got)
		}
	})

	t.Run("zoom", func(t *testing.T) {
		body := `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req := request{header: hdr("x-zm-request-timestamp", ts, "x-zm-signature", "v0="+hexMAC(sha256.New, "zoom-secret-token", "v0:"+ts+":"+body)), body: []byte(body)}
		m := hmac.New(sha256.New, []byte("zoom-secret-token"))
		m.Write([]byte("qgg8vlvZRS6UYooatFL8Aw"))
		want := `{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"` + hex.EncodeToString(m.Sum(nil)) + `"}` + "\n"
		if code, h, got := r.postRaw("zm", req); code != 200 || got != want || h.Get("Content-Type") != "application/json" {
			t.Fatalf("answered %d %q, want %q", code, got, want)
		}
	})

	t.Run("okta GET", func(t *testing.T) {
		h := hdr("Authorization", "okta-secret", "X-Okta-Verification-Challenge", "Me_rShK8JHsTnbyYrWXCEoMGbM_zsZ6k0hLPZ_Pg")
		if code, _, got := r.get("ok", "", h); code != 200 || got != `{"verification":"Me_rShK8JHsTnbyYrWXCEoMGbM_zsZ6k0hLPZ_Pg"}`+"\n" {
			t.Fatalf("answered %d %q", code, got)
		}
		if code, _, _ := r.get("ok", "", hdr("X-Okta-Verification-Challenge", "abc")); code != 401 {
			t.Fatalf("without the token: %d", code)
		}
	})

	t.Run("dropbox GET", func(t *testing.T) {
		code, h, got := r.get("dbx", "?challenge=AbC123xYz", http.Header{})
		if code != 200 || got != "AbC123xYz" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("answered %d %q", code, got)
		}
		if code, _, got := r.get("dbx", "?challenge=%3Cscript%3E", http.Header{}); code != 400 || got == "<script>" {
			t.Fatalf("markup answered %d %q", code, got)
		}
	})

	t.Run("graph POST", func(t *testing.T) {
		const token = "Validation: Testing client application reachability for subscription Request-Id: 522a8e7e-096a-494c-aaf1-ac0dcfca45b7"
		// As Graph sends it: POST, the token URL-encoded, no signature, a
		// text/plain request with an empty body.
		validation := request{header: hdr("Content-Type", "text/plain; charset=utf-8")}
		code, h, got := r.postRaw("gr?validationToken="+url.QueryEscape(token), validation)
		if code != 200 || got != token || h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("answered %d %q %v", code, got, h)
		}
		if code, _, got := r.postRaw("gr?validationToken=%3Cscript%3E", validation); code != 400 || strings.Contains(got, "<script>") {
			t.Fatalf("markup answered %d %q", code, got)
		}
		// Without validationToken a POST is a delivery, verified as usual.
		if a := r.post("gr", request{header: http.Header{}, body: []byte(`{"id":"g-1"}`)}); a.code != 401 || a.reason != "missing_header" {
			t.Fatalf("an unsigned delivery: %d %s", a.code, a.raw)
		}
		// Graph checks with POST: its GET is 405.
		if code, _, _ := r.get("gr", "?validationToken=x", http.Header{}); code != 405 {
			t.Fatalf("GET on graph: %d", code)
		}
	})

	t.Run("GET elsewhere", func(t *testing.T) {
		if code, h, _ := r.get("plain", "?challenge=x", http.Header{}); code != 405 || h.Get("Allow") != "POST" {
			t.Fatalf("GET on a POST-only integration: %d", code)
		}
	})

	for _, name := range []string{"tw", "zm", "ok", "dbx", "gr"} {
		if n := len(r.published(name)); n != 0 {
			t.Errorf("%s: handshakes published %d messages", name, n)
		}
		if got := testutil.ToFloat64(r.metrics.Handshakes.WithLabelValues(name)); got != 1 {
			t.Errorf("%s: handshakes_total = %v, want 1", name, got)
		}
	}
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
