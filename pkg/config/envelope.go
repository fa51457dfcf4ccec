package config

import "fmt"

// Envelope configures the signature ingress puts on the envelope headers the
// processor trusts (Intake-Envelope-Signature, docs/security.md#forged-envelopes):
// without it, whoever may publish to intake.in.> writes any key, tenant or
// object version, and a far-future version freezes an object.
type Envelope struct {
	// Keys are the HMAC keys, each at least MinEnvelopeKeyBytes: the first
	// signs, every one verifies, so a key is rotated by adding the new one
	// second, rolling, swapping the order, rolling, and removing the old
	// one. A secret (EnvelopeKeys): ingress and the processor load it, the
	// replayer does not. None (the default): nothing is signed or checked.
	Keys []string `yaml:"keys"`
	// Require refuses a message without a signature (unsigned_envelope).
	// Defaults to true when Keys are set; false is the setting for a
	// rolling upgrade while ingress pods without keys still publish:
	// unsigned messages are then applied and counted
	// (intake_processor_unsigned_envelopes_total). A bad signature is
	// refused either way.
	Require *bool `yaml:"require"`

	// omitted says the file was loaded without EnvelopeKeys.
	omitted bool
}

// MinEnvelopeKeyBytes is the shortest envelope key: 256 bits, the size of
// the HMAC-SHA256 output.
const MinEnvelopeKeyBytes = 32

// WithDefaults returns e with Require set: true when keys are configured.
func (e Envelope) WithDefaults() Envelope {
	if e.Require == nil && len(e.Keys) > 0 {
		on := true
		e.Require = &on
	}
	return e
}

// Required reports whether an unsigned message is refused.
func (e Envelope) Required() bool { return e.Require != nil && *e.Require && len(e.Keys) > 0 }

// KeyBytes are the keys as HMAC keys, the signing one first.
func (e Envelope) KeyBytes() [][]byte {
	keys := make([][]byte, len(e.Keys))
	for i, k := range e.Keys {
		keys[i] = []byte(k)
	}
	return keys
}

// Validate checks the keys' lengths, and that require: true has keys to
// verify with (unless the file was loaded without them).
func (e Envelope) Validate() error {
	var p problems
	seen := make(map[string]bool, len(e.Keys))
	for i, k := range e.Keys {
		switch {
		case len(k) < MinEnvelopeKeyBytes:
			p.add(fmt.Sprintf("envelope.keys[%d]", i), "must be at least %d bytes, got %d", MinEnvelopeKeyBytes, len(k))
		case seen[k]:
			p.add(fmt.Sprintf("envelope.keys[%d]", i), "repeats an earlier key")
		}
		seen[k] = true
	}
	if e.Require != nil && *e.Require && len(e.Keys) == 0 && !e.omitted {
		p.add("envelope.require", "is true but envelope.keys is empty: nothing could verify")
	}
	return p.err()
}
