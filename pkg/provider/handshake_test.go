package provider

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Twitch's documented webhook_callback_verification body and headers.
const (
	twitchMsgID     = "e76c6bd4-55c9-4987-8304-da1588d8988b"
	twitchTimestamp = "2019-11-16T10:11:12.634234626Z"
	twitchChallenge = "pogchamp-kappa-360noscope-vohiyo"
	twitchVerify    = `{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"webhook_callback_verification_pending","type":"channel.follow","version":"2","cost":1,"condition":{"broadcaster_user_id":"12826","moderator_user_id":"12826"},"transport":{"method":"webhook","callback":"https://example.com/webhooks/callback"},"created_at":"2019-11-16T10:11:12.634234626Z"}}`
)

func twitchConfig() Config {
	return Config{Provider: "twitch", Secrets: []string{"old-twitch-secret", "s3cRe7-twitch"}, Tolerance: DefaultTolerance}
}

func twitchHeader(secret, msgType, id, ts, body string) http.Header {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(id + ts + body))
	return hdr("Twitch-Eventsub-Message-Id", id, "Twitch-Eventsub-Message-Timestamp", ts,
		"Twitch-Eventsub-Message-Type", msgType, "Twitch-Eventsub-Message-Signature", "sha256="+hex.EncodeToString(m.Sum(nil)))
}

// Zoom's documented endpoint.url_validation body.
const zoomValidation = `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`

func zoomConfig() Config {
	return Config{Provider: "hmac", Secrets: []string{"zoom-old", "zoom-secret-token"}, Tolerance: DefaultTolerance, Handshake: "zoom",
		HMAC:    HMACConfig{Header: "x-zm-signature", Prefix: "v0=", Template: "v0:{timestamp}:{body}", TimestampHeader: "x-zm-request-timestamp"},
		EventID: Field{Field: "payload.object.uuid"}, EventType: Field{Field: "event"}}
}

func zoomHeader(secret string, ts int64, body string) http.Header {
	s := strconv.FormatInt(ts, 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + s + ":" + body))
	return hdr("x-zm-request-timestamp", s, "x-zm-signature", "v0="+hex.EncodeToString(m.Sum(nil)))
}

func TestPostHandshakes(t *testing.T) {
	twitchAt, _ := time.Parse(time.RFC3339Nano, twitchTimestamp)
	zoomAt := time.Unix(1654503849, 0)
	edSeed := []byte("discord-test-ed25519-seed-000000")
	edKey := ed25519.NewKeyFromSeed(edSeed)
	discordPub := hex.EncodeToString(edKey.Public().(ed25519.PublicKey))
	discordCfg := Config{Provider: "discord", Secrets: []string{discordPub}, Tolerance: DefaultTolerance}
	discordHeader := func(ts, body string) http.Header {
		return hdr("X-Signature-Timestamp", ts, "X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(edKey, []byte(ts+body))))
	}
	const discordPing = `{"application_id":"1","id":"1100000000000000001","token":"tok","type":1,"version":1}`
	const discordCmd = `{"application_id":"1","id":"1100000000000000002","token":"tok","type":2,"data":{"name":"hello"},"version":1}`
	zoomMAC := func(secret, token string) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(token))
		return hex.EncodeToString(m.Sum(nil))
	}

	for _, tt := range []struct {
		name   string
		cfg    Config
		header http.Header
		body   string
		now    time.Time
		want   Identity
		err    error
	}{
		{name: "twitch: the documented verification", cfg: twitchConfig(), body: twitchVerify, now: twitchAt,
			header: twitchHeader("s3cRe7-twitch", "webhook_callback_verification", twitchMsgID, twitchTimestamp, twitchVerify),
			want:   Identity{Type: "channel.follow", Challenge: twitchChallenge, ChallengeFormat: ChallengeText, SecretIndex: 1}},
		{name: "twitch: a notification is an event", cfg: twitchConfig(), now: twitchAt,
			body:   `{"subscription":{"type":"channel.follow"},"event":{"user_id":"1337"}}`,
			header: twitchHeader("s3cRe7-twitch", "notification", twitchMsgID, twitchTimestamp, `{"subscription":{"type":"channel.follow"},"event":{"user_id":"1337"}}`),
			want:   Identity{ID: twitchMsgID, Type: "channel.follow", SecretIndex: 1}},
		{name: "twitch: a forged verification", cfg: twitchConfig(), body: twitchVerify, now: twitchAt,
			header: twitchHeader("not-the-secret", "webhook_callback_verification", twitchMsgID, twitchTimestamp, twitchVerify), err: ErrBadSignature},
		{name: "twitch: a challenge with markup", cfg: twitchConfig(), now: twitchAt,
			body:   strings.Replace(twitchVerify, twitchChallenge, "<script>", 1),
			header: twitchHeader("s3cRe7-twitch", "webhook_callback_verification", twitchMsgID, twitchTimestamp, strings.Replace(twitchVerify, twitchChallenge, "<script>", 1)), err: ErrMalformed},
		{name: "zoom: the documented url_validation", cfg: zoomConfig(), body: zoomValidation, now: zoomAt,
			header: zoomHeader("zoom-secret-token", 1654503849, zoomValidation),
			want: Identity{Type: "endpoint.url_validation", Challenge: "qgg8vlvZRS6UYooatFL8Aw", ChallengeFormat: ChallengeZoom,
				ChallengeMAC: zoomMAC("zoom-secret-token", "qgg8vlvZRS6UYooatFL8Aw"), SecretIndex: 1}},
		{name: "zoom: a forged url_validation", cfg: zoomConfig(), body: zoomValidation, now: zoomAt,
			header: zoomHeader("guess", 1654503849, zoomValidation), err: ErrBadSignature},
		{name: "zoom: a stale url_validation", cfg: zoomConfig(), body: zoomValidation, now: zoomAt.Add(time.Hour),
			header: zoomHeader("zoom-secret-token", 1654503849, zoomValidation), err: ErrTimestamp},
		{name: "discord: PING", cfg: discordCfg, body: discordPing, now: time.Unix(1700000000, 0),
			header: discordHeader("1700000000", discordPing), want: Identity{Type: "PING", Challenge: "1", ChallengeFormat: ChallengeDiscord}},
		{name: "discord: a command is an event", cfg: discordCfg, body: discordCmd, now: time.Unix(1700000000, 0),
			header: discordHeader("1700000000", discordCmd), want: Identity{ID: "1100000000000000002", Type: "2"}},
		{name: "discord: a forged PING", cfg: discordCfg, body: discordPing, now: time.Unix(1700000000, 0),
			header: discordHeader("1700000000", discordCmd), err: ErrBadSignature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newTestVerifier(t, tt.cfg)
			ev, err := v.Verify(&Request{Header: tt.header, Body: []byte(tt.body), Now: tt.now})
			if tt.err != nil {
				if !errors.Is(err, tt.err) || ev.Challenge != "" {
					t.Fatalf("Verify = %+v, %v; want %v", ev, err, tt.err)
				}
				return
			}
			if err != nil || ev != tt.want {
				t.Fatalf("Verify = %+v, %v;\nwant %+v", ev, err, tt.want)
			}
		})
	}
}

func TestGETHandshakes(t *testing.T) {
	okta, err := NewHandshaker(Config{Provider: "okta", Secrets: []string{"okta-old", "okta-secret"}})
	if err != nil || okta == nil {
		t.Fatalf("okta: %v, %v", okta, err)
	}
	dropbox, err := NewHandshaker(Config{Provider: "hmac", Secrets: []string{"s"}, Handshake: "dropbox",
		HMAC: HMACConfig{Header: "X-Dropbox-Signature"}, EventID: Field{Field: "id"}})
	if err != nil || dropbox == nil {
		t.Fatalf("dropbox: %v, %v", dropbox, err)
	}
	for _, tt := range []struct {
		name   string
		h      *Handshaker
		header http.Header
		query  string
		want   Identity
		err    error
	}{
		{"okta: the documented challenge (Okta support article: the GET carries the Authorization value)", okta, hdr("Authorization", "okta-secret", "X-Okta-Verification-Challenge", "Me_rShK8JHsTnbyYrWXCEoMGbM_zsZ6k0hLPZ_Pg"), "",
			Identity{Challenge: "Me_rShK8JHsTnbyYrWXCEoMGbM_zsZ6k0hLPZ_Pg", ChallengeFormat: ChallengeOkta, SecretIndex: 1}, nil},
		{"okta: without the token", okta, hdr("X-Okta-Verification-Challenge", "abc"), "", Identity{}, ErrMissingHeader},
		{"okta: a wrong token", okta, hdr("Authorization", "okta-secreT", "X-Okta-Verification-Challenge", "abc"), "", Identity{}, ErrBadSignature},
		{"okta: no challenge", okta, hdr("Authorization", "okta-secret"), "", Identity{}, ErrMissingHeader},
		{"okta: a challenge with a quote", okta, hdr("Authorization", "okta-secret", "X-Okta-Verification-Challenge", `a"b`), "", Identity{}, ErrMalformed},
		{"dropbox: the challenge", dropbox, http.Header{}, "challenge=AbC123xYz", Identity{Challenge: "AbC123xYz", ChallengeFormat: ChallengeText}, nil},
		{"dropbox: none", dropbox, http.Header{}, "", Identity{}, ErrMalformed},
		{"dropbox: two", dropbox, http.Header{}, "challenge=a&challenge=b", Identity{}, ErrMalformed},
		{"dropbox: markup", dropbox, http.Header{}, "challenge=%3Cb%3E", Identity{}, ErrMalformed},
		{"dropbox: too long", dropbox, http.Header{}, "challenge=" + strings.Repeat("a", maxHandshakeToken+1), Identity{}, ErrMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tt.query)
			ev, err := tt.h.Answer(tt.header, q)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Answer = %+v, %v; want %v", ev, err, tt.err)
				}
				return
			}
			if err != nil || ev != tt.want {
				t.Fatalf("Answer = %+v, %v; want %+v", ev, err, tt.want)
			}
		})
	}
}

// TestGraphHandshake: Microsoft Graph's subscription validation, a POST
// with ?validationToken= (URL-encoded) and no signature, answered with the
// decoded token as text/plain when it is of the bounded charset; a POST
// without the parameter is a delivery for the family to verify.
func TestGraphHandshake(t *testing.T) {
	for _, cfg := range []Config{
		{Provider: "hmac", Secrets: []string{"s"}, HMAC: HMACConfig{Header: "X-S"}, EventID: Field{Field: "id"}, Handshake: "graph"},
		{Provider: "token", Secrets: []string{"s"}, EventID: Field{Field: "id"}, Handshake: "graph"},
		{Provider: "stripe", Secrets: []string{"whsec_x"}, Handshake: "graph"},
	} {
		if _, err := New(cfg); err != nil {
			t.Fatalf("graph on %s: %v", cfg.Provider, err)
		}
	}
	graph, err := NewHandshaker(Config{Provider: "token", Secrets: []string{"s"}, EventID: Field{Field: "id"}, Handshake: "graph"})
	if err != nil || graph == nil || graph.Method() != http.MethodPost {
		t.Fatalf("graph: %v, %v", graph, err)
	}
	// The token as Graph sends it (Microsoft's "Validation: Testing client
	// application reachability for subscription Request-Id: …").
	const real = "Validation: Testing client application reachability for subscription Request-Id: 522a8e7e-096a-494c-aaf1-ac0dcfca45b7"
	for _, tt := range []struct {
		name, query string
		claims      bool
		want        string
		err         error
	}{
		{"Graph's token, + for spaces", "validationToken=Validation%3a+Testing+client+application+reachability+for+subscription+Request-Id%3a+522a8e7e-096a-494c-aaf1-ac0dcfca45b7", true, real, nil},
		{"Graph's token, %20 for spaces", "validationToken=" + url.PathEscape(real), true, real, nil},
		{"an opaque token", "validationToken=AbC-123_x.y~z%2B%2F%3D", true, "AbC-123_x.y~z+/=", nil},
		{"at the bound", "validationToken=" + strings.Repeat("a", maxGraphToken), true, strings.Repeat("a", maxGraphToken), nil},
		{"past the bound", "validationToken=" + strings.Repeat("a", maxGraphToken+1), true, "", ErrMalformed},
		{"empty", "validationToken=", true, "", ErrMalformed},
		{"two", "validationToken=a&validationToken=b", true, "", ErrMalformed},
		{"markup", "validationToken=%3Cscript%3E", true, "", ErrMalformed},
		{"a header injection", "validationToken=a%0D%0ASet-Cookie%3A+x", true, "", ErrMalformed},
		{"a quote", "validationToken=a%22b", true, "", ErrMalformed},
		{"not UTF-8", "validationToken=%FF", true, "", ErrMalformed},
		{"no token: a delivery", "other=1", false, "", nil},
		{"no query: a delivery", "", false, "", nil},
		{"another letter case: a delivery", "validationtoken=x", false, "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := graph.ClaimsPOST(tt.query); got != tt.claims {
				t.Fatalf("ClaimsPOST = %v", got)
			}
			if !tt.claims {
				return
			}
			q, _ := url.ParseQuery(tt.query)
			ev, err := graph.Answer(http.Header{}, q)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || ev.Challenge != "" {
					t.Fatalf("Answer = %+v, %v; want %v", ev, err, tt.err)
				}
				return
			}
			if want := (Identity{Challenge: tt.want, ChallengeFormat: ChallengeText}); err != nil || ev != want {
				t.Fatalf("Answer = %+v, %v; want %+v", ev, err, want)
			}
		})
	}
	// The GET handshakes claim no POST.
	dropbox, _ := NewHandshaker(Config{Provider: "hmac", Secrets: []string{"s"}, Handshake: "dropbox", HMAC: HMACConfig{Header: "X-S"}, EventID: Field{Field: "id"}})
	if dropbox.ClaimsPOST("validationToken=x") || dropbox.Method() != http.MethodGet {
		t.Fatal("dropbox claims a POST")
	}
}

func TestHandshakeConfig(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cfg    Config
		errHas string
	}{
		{"twitch on token", Config{Provider: "token", Secrets: []string{"s"}, EventID: Field{Header: "X-Id"}, Handshake: "twitch"}, "handshake: twitch is for provider"},
		{"okta on hmac", Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: HMACConfig{Header: "X-S"}, EventID: Field{Field: "id"}, Handshake: "okta"}, "handshake: okta is for provider"},
		{"unknown", Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: HMACConfig{Header: "X-S"}, EventID: Field{Field: "id"}, Handshake: "pigeon"}, "handshake: unknown"},
	} {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: %v, want it to name %q", tt.name, err, tt.errHas)
		}
	}
	if h, err := NewHandshaker(Config{Provider: "twitch", Secrets: []string{"s"}}); h != nil || err != nil {
		t.Errorf("a POST handshake has a GET handshaker: %v %v", h, err)
	}
}

// FuzzHandshakeAnswer: whatever a GET, Graph's validation POST or a
// verified Twitch verification carries, an answered challenge is the value
// sent, made only of the token charset (Graph's: and space and ':') and
// bounded: nothing else is ever reflected.
func FuzzHandshakeAnswer(f *testing.F) {
	dropbox, err := NewHandshaker(Config{Provider: "hmac", Secrets: []string{"s"}, Handshake: "dropbox",
		HMAC: HMACConfig{Header: "X-Dropbox-Signature"}, EventID: Field{Field: "id"}})
	if err != nil {
		f.Fatal(err)
	}
	twitch, err := New(twitchConfig())
	if err != nil {
		f.Fatal(err)
	}
	graph, err := NewHandshaker(Config{Provider: "token", Secrets: []string{"s"}, EventID: Field{Field: "id"}, Handshake: "graph"})
	if err != nil {
		f.Fatal(err)
	}
	at, _ := time.Parse(time.RFC3339Nano, twitchTimestamp)
	f.Add(twitchChallenge)
	f.Add("<script>alert(1)</script>")
	f.Add("a\r\nSet-Cookie: x=1")
	f.Add(strings.Repeat("A", maxHandshakeToken))
	f.Add("Validation: Testing client application reachability for subscription Request-Id: 522a8e7e-096a-494c-aaf1-ac0dcfca45b7")
	f.Fuzz(func(t *testing.T, c string) {
		check := func(ev Identity) {
			if ev.Challenge != c || !validToken(ev.Challenge) {
				t.Fatalf("answered %q for %q", ev.Challenge, c)
			}
			for i := 0; i < len(c); i++ {
				if strings.IndexByte("<>\"'&\r\n ", c[i]) >= 0 {
					t.Fatalf("answered %q", c)
				}
			}
		}
		if ev, err := dropbox.Answer(http.Header{}, url.Values{"challenge": {c}}); err == nil {
			check(ev)
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatal(err)
		}
		// Graph's token also allows space and ':', nothing else more.
		q, _ := url.ParseQuery("validationToken=" + url.QueryEscape(c))
		if ev, err := graph.Answer(http.Header{}, q); err == nil {
			if ev.Challenge != c || !validGraphToken(c) || len(c) > maxGraphToken || strings.ContainsAny(c, "<>\"'&\r\n%\x00") {
				t.Fatalf("graph answered %q for %q", ev.Challenge, c)
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatal(err)
		}
		body := `{"challenge":` + quoteJSON(c) + `,"subscription":{"type":"channel.follow"}}`
		ev, err := twitch.Verify(&Request{Header: twitchHeader("s3cRe7-twitch", "webhook_callback_verification", twitchMsgID, twitchTimestamp, body), Body: []byte(body), Now: at})
		if err == nil {
			check(ev)
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatal(err)
		}
	})
}

func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteString(hex.EncodeToString([]byte{byte(r)}))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
