package config

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestIngressLimitsDefaultsAndValidation(t *testing.T) {
	d := Ingress{}.WithDefaults()
	if d.MaxInflightBodyBytes != DefaultMaxInflightBodyBytes || d.MaxConnections != DefaultMaxConnections ||
		d.MaxJSONDepth != DefaultMaxJSONDepth || d.ClientRateLimit != (ClientRateLimit{PerSecond: DefaultClientPerSecond,
		Burst: DefaultClientBurst, MaxClients: DefaultMaxClients}) || len(d.TrustedProxies) != 0 || d.ClientIPHeader != "" {
		t.Fatalf("Ingress{}.WithDefaults() = %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	off := d
	off.ClientRateLimit.PerSecond = -1
	if err := off.Validate(); err != nil {
		t.Fatalf("client_rate_limit.per_second -1 (off): %v", err)
	}
	for _, tt := range []struct {
		edit  func(*Ingress)
		field string
	}{
		{func(in *Ingress) { in.MaxInflightBodyBytes = in.MaxBodyBytes - 1 }, "ingress.max_inflight_body_bytes"},
		{func(in *Ingress) { in.MaxConnections = -1 }, "ingress.max_connections"},
		{func(in *Ingress) { in.MaxJSONDepth = -3 }, "ingress.max_json_depth"},
		{func(in *Ingress) { in.ClientRateLimit.PerSecond = -2 }, "ingress.client_rate_limit.per_second"},
		{func(in *Ingress) { in.ClientRateLimit.Burst = -1 }, "ingress.client_rate_limit.burst"},
		{func(in *Ingress) { in.ClientRateLimit.MaxClients = -1 }, "ingress.client_rate_limit.max_clients"},
		{func(in *Ingress) { in.TrustedProxies, in.ClientIPHeader = []string{"10.0.0.0/33"}, "X-Forwarded-For" }, "ingress.trusted_proxies"},
		{func(in *Ingress) { in.TrustedProxies = []string{"10.0.0.1"} }, "ingress.client_ip_header"},
	} {
		in := d
		tt.edit(&in)
		if err := in.Validate(); err == nil || !strings.Contains(err.Error(), tt.field+":") {
			t.Errorf("%s: err %v, want one naming it", tt.field, err)
		}
	}
	in := d
	in.TrustedProxies = []string{"10.1.2.3", "192.168.0.0/16", "::ffff:172.16.0.1"}
	got, err := in.TrustedPrefixes()
	want := []netip.Prefix{netip.MustParsePrefix("10.1.2.3/32"), netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("172.16.0.1/32")}
	if err != nil || len(got) != len(want) {
		t.Fatalf("TrustedPrefixes = %v, %v", got, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("TrustedPrefixes[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

// TestBodyLimitsFitTheirBudgets: a body limit past 1 GiB (which overflowed
// the reservations) or one the in-flight budget cannot hold (503 on every
// retry, never a delivery) is refused at start, naming the field.
func TestBodyLimitsFitTheirBudgets(t *testing.T) {
	for name, c := range map[string]struct{ yaml, field string }{
		"integration past 1 GiB": {`
integrations:
  - {name: big, provider: hmac, tenant: acme, secrets: [s], max_body_bytes: 9223372036854775807, hmac: {header: X-Sig}, event_id: {field: id}}
`, "integrations[0] (big).max_body_bytes"},
		"integration above the budget": {`
ingress: {max_inflight_body_bytes: 4194304}
integrations:
  - {name: big, provider: hmac, tenant: acme, secrets: [s], max_body_bytes: 4194304, hmac: {header: X-Sig}, event_id: {field: id}}
`, "integrations[0] (big).max_body_bytes: must be below ingress.max_inflight_body_bytes"},
		"ingress default at the budget": {`
ingress: {max_body_bytes: 2097152, max_inflight_body_bytes: 2097152}
`, "ingress.max_inflight_body_bytes"},
	} {
		_, err := Parse([]byte(c.yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want an error naming %s", name, err, c.field)
		}
	}
}

// MaxBodyBytesDefaulted tells ingress which body limits nobody set: only
// those may be sized to the NATS server. Loading defaults the config and
// ingress.New defaults it again; the answer survives both.
func TestMaxBodyBytesDefaulted(t *testing.T) {
	const integration = `
integrations:
  - {name: a, provider: hmac, tenant: acme, secrets: [s], hmac: {header: X-Sig}, event_id: {field: id}%s}
`
	for _, tt := range []struct {
		name, ingress, integration string
		want                       bool
	}{
		{"nothing set", "", "", true},
		{"the integration's set", "", ", max_body_bytes: 4096", false},
		{"the integration's set to the default", "", ", max_body_bytes: 1048576", false},
		{"ingress's set", "ingress: {max_body_bytes: 1048576}", "", false},
	} {
		cfg, err := Parse([]byte(tt.ingress+fmt.Sprintf(integration, tt.integration)), env(nil))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		again := cfg.WithDefaults()
		for _, in := range []Integration{cfg.Integrations[0], again.Integrations[0]} {
			if got := in.MaxBodyBytesDefaulted(); got != tt.want {
				t.Errorf("%s: MaxBodyBytesDefaulted() = %v, want %v", tt.name, got, tt.want)
			}
		}
	}
	// A limit changed after loading is one somebody set.
	cfg := Config{Integrations: []Integration{{Name: "a"}}}.WithDefaults()
	cfg.Integrations[0].MaxBodyBytes = 2 << 20
	if cfg.Integrations[0].MaxBodyBytesDefaulted() {
		t.Error("a limit set after defaulting reads as defaulted")
	}
}
