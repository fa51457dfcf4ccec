package provider

import (
	"strings"
	"testing"
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
	} {
		if _, err := New(cfg); err != nil {
			t.Errorf("New(%+v): %v", cfg.Provider, err)
		}
	}
}
