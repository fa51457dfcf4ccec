package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mailgunBody is a webhooks 2.0 body in the shape of Mailgun's documented
// example, signed with key as Mailgun's docs (and mailgun-go's
// VerifyWebhookSignature) say: hex HMAC-SHA256(key, timestamp + token).
func mailgunBody(key, ts, token, id, event string) string {
	sig := hex.EncodeToString(macOf(sha256.New, key, ts+token))
	return `{"signature":{"timestamp":"` + ts + `","token":"` + token + `","signature":"` + sig + `"},` +
		`"event-data":{"event":"` + event + `","timestamp":1529006854.329574,"id":"` + id + `","recipient":"alice@example.com"}}`
}

func TestMailgunVerify(t *testing.T) {
	const key = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"
	now := time.Unix(1529006854, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	const token = "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0"
	good := mailgunBody(key, ts, token, "DACSsAdVSeGpLid7TN03WA", "opened")
	cfg := Config{Provider: "mailgun", Secrets: []string{"old-key", key}, Tolerance: DefaultTolerance}

	for _, tt := range []struct {
		name string
		body string
		now  time.Time
		want Identity
		err  error
	}{
		{"signed as Mailgun documents", good, now, Identity{ID: "DACSsAdVSeGpLid7TN03WA", Type: "opened", SecretIndex: 1}, nil},
		{"the wrong key", mailgunBody("key-wrong", ts, token, "x", "opened"), now, Identity{}, ErrBadSignature},
		{"a changed token", strings.Replace(good, token, token[:len(token)-1]+"1", 1), now, Identity{}, ErrBadSignature},
		{"a changed timestamp", strings.Replace(good, `"`+ts+`"`, `"`+strconv.FormatInt(now.Unix()+1, 10)+`"`, 1), now, Identity{}, ErrBadSignature},
		{"stale", good, now.Add(DefaultTolerance + time.Second), Identity{}, ErrTimestamp},
		{"a leading zero", mailgunBody(key, "0"+ts, token, "x", "opened"), now, Identity{}, ErrTimestamp},
		{"no signature block", `{"event-data":{"id":"x"}}`, now, Identity{}, ErrMissingHeader},
		{"not JSON", `{"signature":`, now, Identity{}, ErrBadSignature},
		{"a duplicated token key", strings.Replace(good, `"token":`, `"token":"dup","token":`, 1), now, Identity{}, ErrBadSignature},
		{"a short signature", `{"signature":{"timestamp":"` + ts + `","token":"t","signature":"abcd"},"event-data":{"id":"x"}}`, now, Identity{}, ErrBadSignature},
		{"no event id", `{"signature":` + good[len(`{"signature":`):strings.Index(good, `,"event-data"`)] + `,"event-data":{"event":"opened"}}`, now, Identity{}, ErrMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newTestVerifier(t, cfg)
			ev, err := v.Verify(&Request{Body: []byte(tt.body), Now: tt.now})
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Verify = %+v, %v; want %v", ev, err, tt.err)
				}
				return
			}
			if err != nil || ev != tt.want {
				t.Fatalf("Verify = %+v, %v; want %+v", ev, err, tt.want)
			}
		})
	}

	// The body is not signed: a captured signature block carrying another
	// event is refused; the same bytes again (the sender's retry) are not.
	v := newTestVerifier(t, cfg)
	if _, err := v.Verify(&Request{Body: []byte(good), Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(&Request{Body: []byte(good), Now: now.Add(time.Second)}); err != nil {
		t.Fatalf("the same delivery again: %v", err)
	}
	forged := strings.Replace(good, `"opened"`, `"clicked"`, 1)
	if _, err := v.Verify(&Request{Body: []byte(forged), Now: now.Add(2 * time.Second)}); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a forged event under a used token: %v", err)
	}
}

func TestTokenCacheBound(t *testing.T) {
	c := newTokenCache(2)
	now := time.Unix(1, 0)
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	if !c.claim("t1", a, now, time.Minute) || c.claim("t1", b, now, time.Minute) || !c.claim("t1", a, now, time.Minute) {
		t.Fatal("t1")
	}
	if !c.claim("t1", b, now.Add(2*time.Minute), time.Minute) {
		t.Fatal("an expired token is claimed afresh")
	}
	c.claim("t2", a, now, time.Minute)
	c.claim("t3", a, now, time.Minute) // evicts t1, the oldest
	if len(c.byTok) != 2 || !c.claim("t1", b, now, time.Minute) {
		t.Fatalf("bound: %d entries", len(c.byTok))
	}
}

// FuzzMailgunVerify: success means the body's signature block is the MAC
// of its timestamp and token under the key, the timestamp canonical and in
// the window; any failure wraps a sentinel.
func FuzzMailgunVerify(f *testing.F) {
	const key = "key-fuzz"
	now := time.Unix(1529006854, 0)
	f.Add(mailgunBody(key, "1529006854", "tok", "id-1", "opened"))
	f.Add(`{"signature":{"timestamp":"1529006854","token":"tok","signature":"00"},"event-data":{"id":"x"}}`)
	f.Add(`{"signature":{"timestamp":"1529006854","timestamp":"1","token":"tok"}}`)
	v, err := New(Config{Provider: "mailgun", Secrets: []string{key}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		ev, err := v.Verify(&Request{Body: []byte(body), Now: now})
		if err != nil {
			checkSentinel(t, err)
			return
		}
		ts, _ := jsonField([]byte(body), "signature.timestamp")
		token, _ := jsonField([]byte(body), "signature.token")
		sig, _ := jsonField([]byte(body), "signature.signature")
		want := hex.EncodeToString(macOf(sha256.New, key, ts+token))
		if !strings.EqualFold(sig, want) || ev.ID == "" {
			t.Fatalf("accepted %q", body)
		}
		if at, err := formatUnix.parse(ts, true); err != nil || windowBoth.check(at, now, DefaultTolerance) != nil {
			t.Fatalf("accepted timestamp %q", ts)
		}
	})
}
