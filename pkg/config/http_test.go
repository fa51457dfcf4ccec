package config

import (
	"os"
	"strings"
	"testing"
)

func TestHTTPSection(t *testing.T) {
	secret := env(map[string]string{"SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	cfg, err := Parse([]byte(minimal), secret)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP.InternalAddr != "" || cfg.HTTP.TLS.Enabled() {
		t.Errorf("http defaults = %+v, want one plain listener", cfg.HTTP)
	}
	cfg, err = Parse([]byte(minimal+`
http:
  internal_addr: "127.0.0.1:9100"
  tls: {cert_file: /etc/intake/tls.crt, key_file: /etc/intake/tls.key}
`), secret)
	if err != nil {
		t.Fatal(err)
	}
	want := HTTP{InternalAddr: "127.0.0.1:9100", TLS: TLS{CertFile: "/etc/intake/tls.crt", KeyFile: "/etc/intake/tls.key"}}
	if cfg.HTTP != want || !cfg.HTTP.TLS.Enabled() {
		t.Errorf("http = %+v, want %+v", cfg.HTTP, want)
	}
}

func TestHTTPErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name string
		h    HTTP
		want string // "" for valid
	}{
		{"empty", HTTP{}, ""},
		{"any port", HTTP{InternalAddr: ":9100"}, ""},
		{"port 0", HTTP{InternalAddr: "127.0.0.1:0"}, ""},
		{"no port", HTTP{InternalAddr: "localhost"}, "http.internal_addr: must be host:port"},
		{"cert without key", HTTP{TLS: TLS{CertFile: "c.pem"}}, "http.tls.key_file: required with http.tls.cert_file"},
		{"key without cert", HTTP{TLS: TLS{KeyFile: "k.pem"}}, "http.tls.cert_file: required with http.tls.key_file"},
		{"both", HTTP{TLS: TLS{CertFile: "c.pem", KeyFile: "k.pem"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.h.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestComposeConfigLoads: the production-shaped compose file's configuration
// parses and keeps /metrics and /debug off the public listener.
func TestComposeConfigLoads(t *testing.T) {
	file, err := os.ReadFile("../../deploy/compose/intake.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Its secrets come from the environment (with or without defaults).
	cfg, err := Parse(file, env(map[string]string{
		"INTAKE_OPERATOR_TOKEN": "0123456789abcdef0123", "INTAKE_DEMO_SECRET": "whsec_b3duLXNlY3JldC1vZi1vdXItb3du",
		"INTAKE_PARTNER_SECRET": "partner-secret-of-our-own", "INTAKE_NATS_USER": "ingress",
		"INTAKE_ENVELOPE_KEY":  "an-envelope-key-of-our-own-0123456789abcdef",
		"INTAKE_NATS_PASSWORD": "nats-password-of-our-own"}))
	if err != nil {
		t.Fatalf("deploy/compose/intake.yaml: %v", err)
	}
	if cfg.HTTP.InternalAddr == "" {
		t.Error("deploy/compose/intake.yaml serves /metrics on the public listener: set http.internal_addr")
	}
}
