package provider

// Conformance with GitHub's and Slack's own Go code (test-only
// dependencies): go-github's ValidatePayload / ValidateSignature and
// slack-go's SecretsVerifier accept what Intake signs, and both sides refuse
// the same tampered deliveries; FuzzGitHubDifferential and
// FuzzSlackDifferential compare the two verifiers on fuzzed headers.

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	gogithub "github.com/google/go-github/v75/github"
	slackgo "github.com/slack-go/slack"
)

// sdkRequest is the *http.Request an SDK's verifier reads: h and body.
func sdkRequest(h http.Header, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhooks/x", strings.NewReader(body))
	for k, vs := range h {
		r.Header[k] = vs
	}
	return r
}

// signatureAccepted: Verify got past the signature and timestamp (a
// verified delivery without a usable id is malformed, not unsigned).
func signatureAccepted(err error) bool {
	return err == nil || errors.Is(err, ErrMalformed)
}

// fillMAC writes a fuzzed signature template: {mac} becomes the MAC's hex,
// {MAC} the same in upper case, so a fuzzer keeps reaching valid
// signatures while it mutates what surrounds them.
func fillMAC(tmpl string, mac []byte) string {
	h := hex.EncodeToString(mac)
	return strings.NewReplacer("{mac}", h, "{MAC}", strings.ToUpper(h)).Replace(tmpl)
}

func TestGitHubConformanceWithGoGitHub(t *testing.T) {
	cfg := Config{Provider: "github", Secrets: []string{githubOtherSecret, githubSecret}}
	v := newTestVerifier(t, cfg)
	key := []byte(githubSecret)
	const body = `{"action":"opened","issue":{"id":42}}`

	t.Run("ours signs, go-github verifies", func(t *testing.T) {
		for _, tc := range []struct{ ctype, raw string }{
			{"application/json", body},
			{"application/x-www-form-urlencoded", "payload=" + url.QueryEscape(body)},
		} {
			h, err := SignMessage(cfg, 1, Message{ID: "d-1", Type: "issues", Body: []byte(tc.raw), Time: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			h.Set("Content-Type", tc.ctype)
			payload, err := gogithub.ValidatePayload(sdkRequest(h, tc.raw), key)
			if err != nil || string(payload) != body {
				t.Fatalf("%s: go-github ValidatePayload = %q, %v", tc.ctype, payload, err)
			}
			if ev, err := v.Verify(&Request{Header: h, Body: []byte(tc.raw)}); err != nil || ev.ID != "d-1" || ev.Type != "issues" {
				t.Fatalf("%s: Verify = %+v, %v", tc.ctype, ev, err)
			}
		}
	})

	t.Run("GitHub's documented vector, in both", func(t *testing.T) {
		const sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
		secret := "It's a Secret to Everybody"
		if err := gogithub.ValidateSignature(sig, []byte("Hello, World!"), []byte(secret)); err != nil {
			t.Fatalf("go-github: %v", err)
		}
		doc := newTestVerifier(t, Config{Provider: "github", Secrets: []string{secret}})
		if _, err := doc.Verify(&Request{Header: githubHeader(sig, "d", "push"), Body: []byte("Hello, World!")}); err != nil {
			t.Fatalf("Intake: %v", err)
		}
	})

	t.Run("both refuse", func(t *testing.T) {
		good := githubSig(githubSecret, body)
		for name, d := range map[string]struct{ sig, body string }{
			"tampered body":       {good, body + " "},
			"wrong secret":        {githubSig("nope", body), body},
			"truncated":           {good[:len(good)-2], body},
			"not hex":             {"sha256=" + strings.Repeat("g", 64), body},
			"no prefix":           {strings.TrimPrefix(good, "sha256="), body},
			"sha1= label":         {"sha1=" + strings.TrimPrefix(good, "sha256="), body},
			"two signatures":      {githubSig("nope", body) + "," + good, body},
			"empty":               {"", body},
			"a space after the =": {"sha256= " + strings.TrimPrefix(good, "sha256="), body},
		} {
			if err := gogithub.ValidateSignature(d.sig, []byte(d.body), key); err == nil {
				t.Errorf("%s: go-github accepted", name)
			}
			if _, err := v.Verify(&Request{Header: githubHeader(d.sig, "d", "push"), Body: []byte(d.body)}); err == nil {
				t.Errorf("%s: Intake accepted", name)
			}
		}
	})

	// Deliberately stricter than go-github, which takes the legacy SHA-1
	// X-Hub-Signature when X-Hub-Signature-256 is absent and any sha1=,
	// sha256= or sha512= label: GitHub sends SHA-256 on every delivery.
	t.Run("stricter: SHA-1 and SHA-512", func(t *testing.T) {
		sha1Only := hdr("X-Hub-Signature", "sha1="+hex.EncodeToString(macOf(sha1.New, githubSecret, body)),
			"X-GitHub-Delivery", "d", "Content-Type", "application/json")
		if _, err := gogithub.ValidatePayload(sdkRequest(sha1Only, body), key); err != nil {
			t.Fatalf("go-github refused the SHA-1 header: %v", err)
		}
		if _, err := v.Verify(&Request{Header: sha1Only, Body: []byte(body)}); !errors.Is(err, ErrMissingHeader) {
			t.Fatalf("Intake: %v, want missing_header", err)
		}
		sha512 := "sha512=" + hex.EncodeToString(macOf(sha512.New, githubSecret, body))
		if err := gogithub.ValidateSignature(sha512, []byte(body), key); err != nil {
			t.Fatalf("go-github refused sha512=: %v", err)
		}
		if _, err := v.Verify(&Request{Header: githubHeader(sha512, "d", "push"), Body: []byte(body)}); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("Intake: %v, want bad_signature", err)
		}
	})

	// Bitbucket, Jira (sha256=) and Intercom (sha1=) sign the body as GitHub
	// does, in X-Hub-Signature: go-github's ValidateSignature accepts what the
	// presets' signer produces.
	t.Run("presets on GitHub's scheme", func(t *testing.T) {
		for _, p := range []string{"bitbucket", "jira", "intercom"} {
			const b = `{"id":"e-1","webhookEvent":"jira:issue_created","topic":"x"}`
			pcfg := Config{Provider: p, Secrets: []string{"preset-secret"}}
			h, err := SignMessage(pcfg, 0, Message{ID: "e-1", Body: []byte(b), Time: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if err := gogithub.ValidateSignature(h.Get("X-Hub-Signature"), []byte(b), []byte("preset-secret")); err != nil {
				t.Errorf("%s: go-github: %v", p, err)
			}
			if _, err := newTestVerifier(t, pcfg).Verify(&Request{Header: h, Body: []byte(b)}); err != nil {
				t.Errorf("%s: Intake: %v", p, err)
			}
			if err := gogithub.ValidateSignature(h.Get("X-Hub-Signature"), []byte(b+" "), []byte("preset-secret")); err == nil {
				t.Errorf("%s: go-github accepted a tampered body", p)
			}
		}
	})
}

// FuzzGitHubDifferential: what Intake accepts in X-Hub-Signature-256,
// go-github's ValidateSignature accepts; what go-github accepts under the
// sha256= label, Intake accepts. In the signature template {mac} and {MAC}
// stand for the body's real MAC.
func FuzzGitHubDifferential(f *testing.F) {
	v, err := New(Config{Provider: "github", Secrets: []string{githubSecret}})
	if err != nil {
		f.Fatal(err)
	}
	key := []byte(githubSecret)
	f.Add("sha256={mac}", []byte(`{"zen":"Keep it logically awesome."}`))
	f.Add("sha256={MAC}", []byte(`{}`))
	f.Add("SHA256={mac}", []byte(`x`))
	f.Add("sha256={mac},sha256={mac}", []byte(`x`))
	f.Add("sha256={mac}\n", []byte(``))
	f.Add("sha256= {mac}", []byte(`x`))
	f.Add("sha1={mac}", []byte(`x`))
	f.Add("sha256=sha256={mac}", []byte(`x`))
	f.Add("", []byte(nil))

	f.Fuzz(func(t *testing.T, tmpl string, body []byte) {
		sig := fillMAC(tmpl, macOf(sha256.New, githubSecret, string(body)))
		_, err := v.Verify(&Request{Header: githubHeader(sig, "d-1", "push"), Body: body})
		if err != nil {
			checkSentinel(t, err)
		}
		theirs := gogithub.ValidateSignature(sig, body, key)
		if err == nil && theirs != nil {
			t.Fatalf("Intake accepted %q, go-github refuses: %v", sig, theirs)
		}
		if theirs == nil && strings.HasPrefix(sig, "sha256=") && err != nil {
			t.Fatalf("go-github accepted %q, Intake refuses: %v", sig, err)
		}
	})
}

// slackGoVerify runs slack-go's verifier as its documentation says: headers
// into NewSecretsVerifier (which checks the timestamp against the clock),
// the body written, then Ensure.
func slackGoVerify(h http.Header, body []byte, secret string) error {
	sv, err := slackgo.NewSecretsVerifier(h, secret)
	if err != nil {
		return err
	}
	if _, err := sv.Write(body); err != nil {
		return err
	}
	return sv.Ensure()
}

func TestSlackConformanceWithSlackGo(t *testing.T) {
	cfg := Config{Provider: "slack", Secrets: []string{slackOtherSecret, slackSecret}}
	v := newTestVerifier(t, cfg)
	const body = `{"type":"event_callback","event_id":"Ev01","event":{"type":"app_mention","text":"hi"}}`
	now := time.Now()

	t.Run("ours signs, slack-go verifies", func(t *testing.T) {
		h, err := Sign(cfg, 1, "", []byte(body), now)
		if err != nil {
			t.Fatal(err)
		}
		if err := slackGoVerify(h, []byte(body), slackSecret); err != nil {
			t.Fatalf("slack-go: %v", err)
		}
		if ev, err := v.Verify(&Request{Header: h, Body: []byte(body), Now: now}); err != nil || ev.ID != "Ev01" {
			t.Fatalf("Intake: %+v, %v", ev, err)
		}
		// Upper-case hex: both decode it.
		h.Set("X-Slack-Signature", "v0="+strings.ToUpper(strings.TrimPrefix(h.Get("X-Slack-Signature"), "v0=")))
		if err := slackGoVerify(h, []byte(body), slackSecret); err != nil {
			t.Fatalf("slack-go, upper case: %v", err)
		}
		if _, err := v.Verify(&Request{Header: h, Body: []byte(body), Now: now}); err != nil {
			t.Fatalf("Intake, upper case: %v", err)
		}
	})

	t.Run("both refuse", func(t *testing.T) {
		ts := strconv.FormatInt(now.Unix(), 10)
		at := func(d time.Duration) http.Header {
			s := strconv.FormatInt(now.Add(d).Unix(), 10)
			return slackHeader(s, slackSig(slackSecret, s, body))
		}
		good := slackSig(slackSecret, ts, body)
		for name, d := range map[string]struct {
			h    http.Header
			body string
		}{
			"tampered body":       {slackHeader(ts, good), body + " "},
			"tampered timestamp":  {slackHeader(strconv.FormatInt(now.Unix()-1, 10), good), body},
			"wrong secret":        {slackHeader(ts, slackSig("nope", ts, body)), body},
			"stale":               {at(-6 * time.Minute), body},
			"future":              {at(6 * time.Minute), body},
			"v1= label":           {slackHeader(ts, "v1="+strings.TrimPrefix(good, "v0=")), body},
			"truncated":           {slackHeader(ts, good[:40]), body},
			"no timestamp header": {with(slackHeader(ts, good), "X-Slack-Request-Timestamp", ""), body},
			"no signature header": {with(slackHeader(ts, good), "X-Slack-Signature", ""), body},
		} {
			if err := slackGoVerify(d.h, []byte(d.body), slackSecret); err == nil {
				t.Errorf("%s: slack-go accepted", name)
			}
			if _, err := v.Verify(&Request{Header: d.h, Body: []byte(d.body), Now: now}); err == nil {
				t.Errorf("%s: Intake accepted", name)
			}
		}
	})
}

// FuzzSlackDifferential: slack-go's SecretsVerifier against Intake's slack
// verifier, both at the clock's now. {ts} in the timestamp template is now
// plus offset seconds; {mac} and {MAC} in the signature template are the
// real MAC of what the headers and body say. What Intake accepts, slack-go
// accepts; what slack-go accepts with a plain-digit timestamp, Intake
// accepts (a few seconds around the 5-minute edge are left out: the two
// read the clock at different instants).
func FuzzSlackDifferential(f *testing.F) {
	v, err := New(Config{Provider: "slack", Secrets: []string{slackSecret}})
	if err != nil {
		f.Fatal(err)
	}
	const ev = `{"type":"event_callback","event_id":"Ev1","event":{"type":"message"}}`
	f.Add(int64(0), "{ts}", "v0={mac}", []byte(ev))
	f.Add(int64(-299), "{ts}", "v0={MAC}", []byte(ev))
	f.Add(int64(400), "{ts}", "v0={mac}", []byte(ev))
	f.Add(int64(0), "0{ts}", "v0={mac}", []byte(ev))
	f.Add(int64(0), "+{ts}", "v0={mac}", []byte(ev))
	f.Add(int64(0), "{ts}", "v0={mac} ", []byte(ev))
	f.Add(int64(0), "{ts}", "V0={mac}", []byte(`{"type":"url_verification","challenge":"abc"}`))
	f.Add(int64(0), "{ts}", "v0={mac},v0={mac}", []byte(`token=x`))
	f.Add(int64(0), "", "", []byte(nil))

	f.Fuzz(func(t *testing.T, offset int64, tsTmpl, sigTmpl string, body []byte) {
		now := time.Now()
		if offset > 1<<40 || offset < -(1<<40) {
			return
		}
		ts := strings.ReplaceAll(tsTmpl, "{ts}", strconv.FormatInt(now.Unix()+offset, 10))
		sig := fillMAC(sigTmpl, macOf(sha256.New, slackSecret, "v0:"+ts+":"+string(body)))
		if sec, err := strconv.ParseInt(ts, 10, 64); err == nil {
			if d := now.Unix() - sec; (d >= 298 && d <= 302) || (d <= -298 && d >= -302) {
				return
			}
		}
		h := slackHeader(ts, sig)
		_, err := v.Verify(&Request{Header: h, Body: body, Now: now})
		if err != nil {
			checkSentinel(t, err)
		}
		theirs := slackGoVerify(h, body, slackSecret)
		if signatureAccepted(err) && theirs != nil {
			t.Fatalf("Intake accepted ts %q sig %q, slack-go refuses: %v", ts, sig, theirs)
		}
		digits := ts != "" && strings.Trim(ts, "0123456789") == ""
		if theirs == nil && digits && !signatureAccepted(err) {
			t.Fatalf("slack-go accepted ts %q sig %q, Intake refuses: %v", ts, sig, err)
		}
	})
}
