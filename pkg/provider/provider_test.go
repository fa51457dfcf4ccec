package provider

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestNewConfigErrors(t *testing.T) {
	hmacOK := HMACConfig{Header: "X-Sig"}
	tests := []struct {
		name   string
		cfg    Config
		errHas string // the config key the message must name
	}{
		{name: "no provider", cfg: Config{Secrets: []string{"s"}}, errHas: "provider:"},
		{name: "unknown provider", cfg: Config{Provider: "carrier-pigeon", Secrets: []string{"s"}}, errHas: "provider: unknown"},
		{name: "no secrets", cfg: Config{Provider: "hmac"}, errHas: "secrets:"},
		{name: "empty secret", cfg: Config{Provider: "hmac", Secrets: []string{"a", ""}}, errHas: "secrets[1]"},
		{name: "negative tolerance", cfg: Config{Provider: "standard", Secrets: []string{whsec(keyA)}, Tolerance: -1}, errHas: "tolerance:"},
		{name: "standard: bad base64 secret", cfg: Config{Provider: "standard", Secrets: []string{whsec(keyA), "whsec_not*base64!"}},
			errHas: "secrets[1]"},
		{name: "standard: plain-text secret", cfg: Config{Provider: "standard", Secrets: []string{"my secret"}}, errHas: "secrets[0]"},
		{name: "standard: prefix only", cfg: Config{Provider: "standard", Secrets: []string{"whsec_"}}, errHas: "secrets[0]"},
		{name: "standard: event_id path with wildcard", cfg: Config{Provider: "standard", Secrets: []string{whsec(keyA)},
			EventID: Field{Field: "data.*"}}, errHas: "event_id.field"},
		{name: "standard: event_type bad header", cfg: Config{Provider: "standard", Secrets: []string{whsec(keyA)},
			EventType: Field{Header: "X-Type:"}}, errHas: "event_type.header"},
		{name: "hmac: missing header", cfg: Config{Provider: "hmac", Secrets: []string{"s"}, EventID: Field{Field: "id"}},
			errHas: "hmac.header"},
		{name: "hmac: bad header", cfg: Config{Provider: "hmac", Secrets: []string{"s"}, EventID: Field{Field: "id"},
			HMAC: HMACConfig{Header: "X Sig"}}, errHas: "hmac.header"},
		{name: "hmac: missing event_id", cfg: Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: hmacOK}, errHas: "event_id"},
		{name: "hmac: unknown algorithm", cfg: Config{Provider: "hmac", Secrets: []string{"s"}, EventID: Field{Field: "id"},
			HMAC: HMACConfig{Header: "X-Sig", Algorithm: "md5"}}, errHas: "hmac.algorithm"},
		{name: "hmac: unknown encoding", cfg: Config{Provider: "hmac", Secrets: []string{"s"}, EventID: Field{Field: "id"},
			HMAC: HMACConfig{Header: "X-Sig", Encoding: "base32"}}, errHas: "hmac.encoding"},
		{name: "hmac: event_id modifier path", cfg: Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: hmacOK,
			EventID: Field{Field: "@reverse"}}, errHas: "event_id.field"},
		{name: "hmac: event_type empty key", cfg: Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: hmacOK,
			EventID: Field{Field: "id"}, EventType: Field{Field: "data..type"}}, errHas: "event_type.field"},
		{name: "hmac options on another provider", cfg: Config{Provider: "github", Secrets: []string{"s"}, HMAC: hmacOK}, errHas: "hmac: only"},
		{name: "allowed_shops on another provider", cfg: Config{Provider: "slack", Secrets: []string{"s"},
			AllowedShops: []string{"a.myshopify.com"}}, errHas: "allowed_shops: only"},
		{name: "svix: plain-text secret", cfg: Config{Provider: "svix", Secrets: []string{"my secret"}}, errHas: "secrets[0]"},
		{name: "stripe: object_id wildcard", cfg: Config{Provider: "stripe", Secrets: []string{"s"}, ObjectID: Field{Field: "data.*"}},
			errHas: "object_id.field"},
		{name: "shopify: object_version bad header", cfg: Config{Provider: "shopify", Secrets: []string{"s"},
			AllowedShops: []string{"a.myshopify.com"}, ObjectVersion: Field{Header: "X Version"}}, errHas: "object_version.header"},
		{name: "github: event_type bad path", cfg: Config{Provider: "github", Secrets: []string{"s"},
			EventType: Field{Field: "a..b"}}, errHas: "event_type.field"},
		{name: "slack: event_id modifier", cfg: Config{Provider: "slack", Secrets: []string{"s"},
			EventID: Field{Field: "@this"}}, errHas: "event_id.field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := New(tt.cfg)
			if err == nil {
				t.Fatalf("New = %T, want an error naming %q", v, tt.errHas)
			}
			if !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("err %q does not name %q", err, tt.errHas)
			}
			assertNoLeak(t, err, tt.cfg.Secrets...)
		})
	}
}

func TestNewAccepts(t *testing.T) {
	for _, cfg := range []Config{
		{Provider: "standard", Secrets: []string{specSecret}},
		{Provider: "standard", Secrets: []string{specSecret}, EventID: Field{Header: "X-Id"}, EventType: Field{Field: `meta.event\.type`}},
		{Provider: "hmac", Secrets: []string{"s"}, HMAC: HMACConfig{Header: "X-Sig", Algorithm: "SHA512", Encoding: "Base64"},
			EventID: Field{Field: "items.0.id"}},
		{Provider: "standard", Secrets: []string{specSecret, whpk}},
		{Provider: "svix", Secrets: []string{specSecret}},
		{Provider: "stripe", Secrets: []string{"whsec_x"}, Tolerance: 10 * time.Minute},
		{Provider: "github", Secrets: []string{"s"}},
		{Provider: "shopify", Secrets: []string{"s"}, AllowedShops: []string{"Acme.myshopify.com"}},
		{Provider: "slack", Secrets: []string{"s"}, ObjectID: Field{Field: "team_id"}},
	} {
		if _, err := New(cfg); err != nil {
			t.Errorf("New(%+v): %v", cfg.Provider, err)
		}
	}
}

// verifyCase is one row of a provider's table test.
type verifyCase struct {
	name    string
	cfg     func(*Config) // edits the test's base config
	header  http.Header
	body    *string       // nil: the test's default body
	now     time.Duration // offset from the test's now
	want    Identity
	wantErr error
	errHas  string // a detail the message must name
}

func strp(s string) *string { return &s }

// runVerifyCases runs cases against verifiers built from base. Every error
// must wrap the wanted sentinel, map to its reason and leak none of the
// secrets, signatures or body.
func runVerifyCases(t *testing.T, base Config, body string, now time.Time, cases []verifyCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.Secrets = append([]string(nil), base.Secrets...)
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			b := body
			if tt.body != nil {
				b = *tt.body
			}
			v := newTestVerifier(t, cfg)
			ev, err := v.Verify(&Request{Header: tt.header, Body: []byte(b), Now: now.Add(tt.now)})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v (event %+v)", err, tt.wantErr, ev)
				}
				if got, want := Reason(err), Reason(tt.wantErr); got != want {
					t.Errorf("Reason = %q, want %q", got, want)
				}
				if tt.errHas != "" && !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("err %q does not name %q", err, tt.errHas)
				}
				sensitive := append([]string{b}, cfg.Secrets...)
				for _, vs := range tt.header {
					for _, v := range vs {
						if len(v) >= 20 { // signatures; short values are ids and names
							sensitive = append(sensitive, v)
						}
					}
				}
				assertNoLeak(t, err, sensitive...)
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if ev != tt.want {
				t.Fatalf("event = %+v\n          want %+v", ev, tt.want)
			}
		})
	}
}

// hdr builds a header from name/value pairs.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// with returns a copy of h with name set to value ("" deletes it).
func with(h http.Header, name, value string) http.Header {
	c := h.Clone()
	if value == "" {
		c.Del(name)
	} else {
		c.Set(name, value)
	}
	return c
}

func TestReason(t *testing.T) {
	for err, want := range map[error]string{
		ErrMissingHeader: "missing_header", ErrBadSignature: "bad_signature", ErrTimestamp: "timestamp",
		ErrAccount: "account_not_allowed", ErrMalformed: "malformed", errors.New("x"): "error",
	} {
		if got := Reason(fmt.Errorf("wrapped: %w", err)); got != want {
			t.Errorf("Reason(%v) = %q, want %q", err, got, want)
		}
	}
}
