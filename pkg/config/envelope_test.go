package config

import (
	"strings"
	"testing"
)

const envelopeYAML = `
envelope:
  keys: ["${TEST_ENVELOPE_KEY}"]
`

func TestEnvelopeKeysAreTheSigningRolesSecret(t *testing.T) {
	key := map[string]string{"TEST_ENVELOPE_KEY": "an-envelope-key-of-32-bytes-or-more"}
	for _, want := range []Secrets{EnvelopeKeys, AllSecrets} {
		cfg, err := ParseFor([]byte(envelopeYAML), env(key), want)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Envelope.Keys) != 1 || !cfg.Envelope.Required() {
			t.Errorf("%s: keys %d, required %v; want 1 and required by default", want, len(cfg.Envelope.Keys), cfg.Envelope.Required())
		}
	}
	// The replayer (and migrate) load the file without the variable set.
	for _, want := range []Secrets{APITokens, NoSecrets, WebhookSecrets | APITokens} {
		cfg, err := ParseFor([]byte(envelopeYAML+"  require: true\n"), env(nil), want)
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		if len(cfg.Envelope.Keys) != 0 || cfg.Holds(EnvelopeKeys) {
			t.Errorf("%s: holds the envelope keys", want)
		}
	}
	if got := (WebhookSecrets | EnvelopeKeys).String(); got != "config.WebhookSecrets|config.EnvelopeKeys" {
		t.Errorf("String() = %q", got)
	}
}

func TestEnvelopeValidation(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{`{keys: ["short"]}`, "envelope.keys[0]: must be at least 32 bytes, got 5"},
		{`{keys: ["an-envelope-key-of-32-bytes-or-more", "an-envelope-key-of-32-bytes-or-more"]}`, "envelope.keys[1]: repeats an earlier key"},
		{`{require: true}`, "envelope.require: is true but envelope.keys is empty"},
		{`{key: ["x"]}`, "field key not found"},
	} {
		if _, err := Parse([]byte("envelope: "+tt.yaml), env(nil)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error = %v, want %q", tt.yaml, err, tt.want)
		}
	}
	cfg, err := Parse([]byte(`envelope: {keys: ["an-envelope-key-of-32-bytes-or-more"], require: false}`), env(nil))
	if err != nil || cfg.Envelope.Required() {
		t.Errorf("require: false: %v, required %v", err, cfg != nil && cfg.Envelope.Required())
	}
}
