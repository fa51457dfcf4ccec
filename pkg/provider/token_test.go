package provider

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

func TestTokenVerify(t *testing.T) {
	const body = `{"id":"evt_tok"}`
	now := time.Unix(1_700_000_000, 0)
	tok := Config{Provider: "token", Secrets: []string{"tok-old", "tok-new"}, Token: TokenConfig{Header: "X-Gitlab-Token"},
		EventID: Field{Field: "id"}}
	runVerifyCases(t, tok, body, now, []verifyCase{
		{name: "second token", header: hdr("X-Gitlab-Token", "tok-new"), want: Identity{ID: "evt_tok", SecretIndex: 1}},
		{name: "first token", header: hdr("X-Gitlab-Token", "tok-old"), want: Identity{ID: "evt_tok"}},
		{name: "prefix of a token", header: hdr("X-Gitlab-Token", "tok-"), wantErr: ErrBadSignature},
		{name: "token plus a byte", header: hdr("X-Gitlab-Token", "tok-new "), wantErr: ErrBadSignature},
		{name: "other case", header: hdr("X-Gitlab-Token", "TOK-NEW"), wantErr: ErrBadSignature},
		{name: "missing", header: hdr("Authorization", "tok-new"), wantErr: ErrMissingHeader},
		{name: "bearer prefix", cfg: func(c *Config) { c.Token = TokenConfig{Prefix: "Bearer "} },
			header: hdr("Authorization", "Bearer tok-new"), want: Identity{ID: "evt_tok", SecretIndex: 1}},
		{name: "bearer prefix missing", cfg: func(c *Config) { c.Token = TokenConfig{Prefix: "Bearer "} },
			header: hdr("Authorization", "tok-new"), wantErr: ErrBadSignature},
		{name: "id from a header", cfg: func(c *Config) { c.EventID = Field{Header: "X-Gitlab-Event-UUID"} },
			header: hdr("X-Gitlab-Token", "tok-new", "X-Gitlab-Event-UUID", "u-1"), want: Identity{ID: "u-1", SecretIndex: 1}},
	})
	basic := Config{Provider: "basic", Secrets: []string{"hooks:pw:with:colons"}, EventID: Field{Field: "id"}}
	b := func(s string) map[string][]string {
		return hdr("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(s)))
	}
	runVerifyCases(t, basic, body, now, []verifyCase{
		{name: "basic", header: b("hooks:pw:with:colons"), want: Identity{ID: "evt_tok"}},
		{name: "basic scheme in lower case", header: hdr("Authorization", "basic "+base64.StdEncoding.EncodeToString([]byte("hooks:pw:with:colons"))),
			want: Identity{ID: "evt_tok"}},
		{name: "wrong password", header: b("hooks:pw"), wantErr: ErrBadSignature},
		{name: "wrong user", header: b("Hooks:pw:with:colons"), wantErr: ErrBadSignature},
		{name: "not base64", header: hdr("Authorization", "Basic !!"), wantErr: ErrBadSignature},
		{name: "bearer", header: hdr("Authorization", "Bearer hooks:pw:with:colons"), wantErr: ErrBadSignature},
		{name: "missing", header: hdr("X-Other", "x"), wantErr: ErrMissingHeader},
	})
	for _, tt := range []struct {
		name   string
		cfg    Config
		errHas string
	}{
		{"basic secret without a user", Config{Provider: "basic", Secrets: []string{"password"}, EventID: Field{Field: "id"}}, "user:password"},
		{"basic with token options", Config{Provider: "basic", Secrets: []string{"u:p"}, Token: TokenConfig{Header: "X"}, EventID: Field{Field: "id"}}, "token:"},
		{"token without an event id", Config{Provider: "token", Secrets: []string{"t"}}, "event_id"},
		{"token bad header", Config{Provider: "token", Secrets: []string{"t"}, Token: TokenConfig{Header: "A B"}, EventID: Field{Field: "id"}}, "token.header"},
		{"token options on hmac", Config{Provider: "hmac", Secrets: []string{"t"}, Token: TokenConfig{Header: "X"}}, "token: only"},
	} {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: err = %v, want it to name %q", tt.name, err, tt.errHas)
		}
	}
}

// FuzzTokenVerify: a token or Basic credential passes only when it is one
// of the secrets, byte for byte.
func FuzzTokenVerify(f *testing.F) {
	secrets := []string{"tok-old", "hooks:pw"}
	tok, err := New(Config{Provider: "token", Secrets: secrets, Token: TokenConfig{Prefix: "Bearer "}, EventID: Field{Header: "X-Id"}})
	if err != nil {
		f.Fatal(err)
	}
	basic, err := New(Config{Provider: "basic", Secrets: secrets[1:], EventID: Field{Header: "X-Id"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Bearer tok-old")
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte("hooks:pw")))
	f.Add("Basic  aG9va3M6cHc=")
	f.Add("basic aG9va3M6cHc")
	f.Add("")
	f.Fuzz(func(t *testing.T, auth string) {
		h := hdr("Authorization", auth, "X-Id", "d")
		if ev, err := tok.Verify(&Request{Header: h}); err != nil {
			checkSentinel(t, err)
		} else if auth != "Bearer "+secrets[ev.SecretIndex] {
			t.Fatalf("token accepted %q as secrets[%d]", auth, ev.SecretIndex)
		}
		if _, err := basic.Verify(&Request{Header: h}); err != nil {
			checkSentinel(t, err)
		} else {
			scheme, cred, _ := strings.Cut(h.Get("Authorization"), " ")
			raw, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
			if !strings.EqualFold(scheme, "basic") || derr != nil || string(raw) != "hooks:pw" {
				t.Fatalf("basic accepted %q", auth)
			}
		}
	})
}
