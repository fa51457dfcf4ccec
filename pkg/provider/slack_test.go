package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	slackSecret      = "slack-signing-secret-0123456789ab"
	slackOtherSecret = "slack-signing-secret-rotated-4567"
)

func slackSig(secret, ts, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":" + body))
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

func slackHeader(ts, sig string) http.Header {
	return hdr("X-Slack-Request-Timestamp", ts, "X-Slack-Signature", sig)
}

// Slack's documented example (api.slack.com, "Verifying requests from
// Slack"): a slash command, so event_id comes from a configured header here.
func TestSlackDocsVector(t *testing.T) {
	const (
		secret = "8f742231b10e8888abcd99yyyzzz85a5"
		ts     = "1531420618"
		body   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
		want   = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
	)
	now := time.Unix(1531420618, 0)
	// By default the form body has no event_id: verified, then malformed.
	v := newTestVerifier(t, Config{Provider: "slack", Secrets: []string{secret}})
	if _, err := v.Verify(&Request{Header: slackHeader(ts, want), Body: []byte(body), Now: now}); Reason(err) != "malformed" {
		t.Fatalf("default config: err = %v, want malformed (verified, but no event_id)", err)
	}
	v = newTestVerifier(t, Config{Provider: "slack", Secrets: []string{secret}, EventID: Field{Header: "X-Test-Id"}})
	ev, err := v.Verify(&Request{Header: with(slackHeader(ts, want), "X-Test-Id", "cmd-1"), Body: []byte(body), Now: now})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if ev != (Identity{ID: "cmd-1"}) {
		t.Fatalf("event = %+v", ev)
	}
	if got := slackSig(secret, ts, body); got != want {
		t.Fatalf("test signer = %s, want the documented %s", got, want)
	}
}

func TestSlackVerify(t *testing.T) {
	const body = `{"token":"x","team_id":"T1","type":"event_callback","event_id":"Ev01","event_time":1700000000,"event":{"type":"app_mention","text":"hi"}}`
	now := time.Unix(1_700_000_000, 0)
	tsStr := strconv.FormatInt(now.Unix(), 10)
	good := slackSig(slackSecret, tsStr, body)
	at := func(offset time.Duration) http.Header {
		ts := strconv.FormatInt(now.Add(offset).Unix(), 10)
		return slackHeader(ts, slackSig(slackSecret, ts, body))
	}
	signed := func(b string) http.Header { return slackHeader(tsStr, slackSig(slackSecret, tsStr, b)) }
	want := Identity{ID: "Ev01", Type: "app_mention"}
	const challenge = `{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`

	runVerifyCases(t, Config{Provider: "slack", Secrets: []string{slackSecret}}, body, now, []verifyCase{
		{name: "valid", header: slackHeader(tsStr, good), want: want},
		{name: "url_verification answered", body: strp(challenge), header: signed(challenge),
			want: Identity{Type: "url_verification", Challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}},
		{name: "url_verification with a wrong signature", body: strp(challenge), header: slackHeader(tsStr, good), wantErr: ErrBadSignature},
		{name: "url_verification stale", body: strp(challenge), header: func() http.Header {
			ts := strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)
			return slackHeader(ts, slackSig(slackSecret, ts, challenge))
		}(), wantErr: ErrTimestamp},
		{name: "url_verification without challenge", body: strp(`{"type":"url_verification"}`),
			header: signed(`{"type":"url_verification"}`), wantErr: ErrMalformed},
		{name: "url_verification with a challenge to reflect", body: strp(`{"type":"url_verification","challenge":"<script>x</script> y"}`),
			header: signed(`{"type":"url_verification","challenge":"<script>x</script> y"}`), wantErr: ErrMalformed},
		{name: "type falls back to the top level", body: strp(`{"type":"app_rate_limited_x","event_id":"Ev2"}`),
			header: signed(`{"type":"app_rate_limited_x","event_id":"Ev2"}`), want: Identity{ID: "Ev2", Type: "app_rate_limited_x"}},
		{name: "rotated: second secret", cfg: func(c *Config) { c.Secrets = []string{slackOtherSecret, slackSecret} },
			header: slackHeader(tsStr, good), want: Identity{ID: "Ev01", Type: "app_mention", SecretIndex: 1}},
		{name: "wrong secret", header: slackHeader(tsStr, slackSig(slackOtherSecret, tsStr, body)), wantErr: ErrBadSignature},
		{name: "tampered body", body: strp(strings.Replace(body, "hi", "ho", 1)), header: slackHeader(tsStr, good), wantErr: ErrBadSignature},
		{name: "tampered timestamp", header: slackHeader(strconv.FormatInt(now.Unix()-1, 10), good), wantErr: ErrBadSignature},
		{name: "stale at the boundary", header: at(-300 * time.Second), want: want},
		{name: "stale just past the boundary", header: at(-301 * time.Second), wantErr: ErrTimestamp},
		{name: "future at the boundary", header: at(300 * time.Second), want: want},
		{name: "future just past the boundary", header: at(301 * time.Second), wantErr: ErrTimestamp},
		{name: "timestamp not an integer", header: slackHeader(tsStr+".0", slackSig(slackSecret, tsStr+".0", body)), wantErr: ErrTimestamp},
		{name: "timestamp in milliseconds", header: slackHeader(tsStr+"000", slackSig(slackSecret, tsStr+"000", body)), wantErr: ErrTimestamp},
		{name: "missing signature", header: with(slackHeader(tsStr, good), "X-Slack-Signature", ""), wantErr: ErrMissingHeader, errHas: "X-Slack-Signature"},
		{name: "missing timestamp", header: with(slackHeader(tsStr, good), "X-Slack-Request-Timestamp", ""), wantErr: ErrMissingHeader,
			errHas: "X-Slack-Request-Timestamp"},
		{name: "v1= label", header: slackHeader(tsStr, "v1="+strings.TrimPrefix(good, "v0=")), wantErr: ErrBadSignature},
		{name: "truncated", header: slackHeader(tsStr, good[:40]), wantErr: ErrBadSignature},
		{name: "no event_id", body: strp(`{"type":"event_callback"}`), header: signed(`{"type":"event_callback"}`), wantErr: ErrMalformed},
		{name: "object fields configured", cfg: func(c *Config) {
			c.ObjectID = Field{Field: "team_id"}
			c.ObjectVersion = Field{Field: "event_time"}
		}, header: slackHeader(tsStr, good), want: Identity{ID: "Ev01", Type: "app_mention", ObjectID: "T1", ObjectVersion: "1700000000"}},
	})
}

// Issue 14: X-Slack-Retry-* were read for every provider, unsigned, up to
// 64 KiB, and stored forever. Now only the Slack verifier reads them, in
// Slack's shape.
func TestRetryHintsOnlySlacksAndBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	const body = `{"type":"event_callback","event_id":"Ev1","event":{"type":"message"}}`
	ts := "1700000000"
	slack := newTestVerifier(t, Config{Provider: "slack", Secrets: []string{slackSecret}})
	for _, c := range []struct {
		num, reason string
		want        map[string]string
	}{
		{"1", "http_timeout", map[string]string{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}},
		{"", "", nil},
		{strings.Repeat("9", 64<<10), strings.Repeat("a", 64<<10), nil},
		{"1\u202e", "http timeout", nil},
		{"1234", "http_timeout", map[string]string{"X-Slack-Retry-Reason": "http_timeout"}},
	} {
		h := with(with(slackHeader(ts, slackSig(slackSecret, ts, body)), "X-Slack-Retry-Num", c.num), "X-Slack-Retry-Reason", c.reason)
		ev, err := slack.Verify(&Request{Header: h, Body: []byte(body), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.HintMap(); len(got) != len(c.want) || got["X-Slack-Retry-Num"] != c.want["X-Slack-Retry-Num"] ||
			got["X-Slack-Retry-Reason"] != c.want["X-Slack-Retry-Reason"] {
			t.Errorf("num %.10q reason %.10q: hints %v, want %v", c.num, c.reason, got, c.want)
		}
	}

	gh := newTestVerifier(t, Config{Provider: "github", Secrets: []string{githubSecret}})
	h := hdr("X-Hub-Signature-256", githubSig(githubSecret, body), "X-GitHub-Delivery", "d1", "X-GitHub-Event", "push",
		"X-Slack-Retry-Num", "1", "X-Slack-Retry-Reason", "http_timeout")
	ev, err := gh.Verify(&Request{Header: h, Body: []byte(body), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if hints := ev.HintMap(); hints != nil {
		t.Fatalf("github delivery kept Slack's retry headers: %v", hints)
	}
}
