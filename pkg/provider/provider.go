package provider

import (
	"fmt"
	"net/http"
	"time"
)

// Delivery is one HTTP request as a provider sees it.
type Delivery struct {
	Header http.Header
	Body   []byte // the exact bytes received
	Now    time.Time
}

// Event is the identity a verified delivery carries.
type Event struct {
	ID      string // provider's stable event id: the dedup id
	Type    string // provider's event type; "" when the provider gives none
	Account string // provider account scope when the delivery carries a verified one; "" otherwise
	// SecretIndex is the index in Config.Secrets of the secret that matched, so
	// operators can see when a rotated-out secret stops being used.
	SecretIndex int
}

// Verifier checks one delivery and extracts its identity.
type Verifier interface {
	// Verify returns the event's identity or an error wrapping one of the
	// sentinel errors (ErrMissingHeader, ErrBadSignature, ErrTimestamp,
	// ErrMalformed).
	Verify(d *Delivery) (Event, error)
}

// Field says where a value comes from: a request header or a JSON field of the
// body (a dotted path such as "data.object.id"). Header wins when both are set.
type Field struct {
	Header string `yaml:"header,omitempty" json:"header,omitempty"`
	Field  string `yaml:"field,omitempty" json:"field,omitempty"`
}

// IsZero reports whether no source is configured.
func (f Field) IsZero() bool { return f.Header == "" && f.Field == "" }

// HMACConfig configures the generic `hmac` provider.
type HMACConfig struct {
	// Header carrying the signature. Required for provider hmac.
	Header string `yaml:"header,omitempty"`
	// Algorithm: sha256 (default) or sha512.
	Algorithm string `yaml:"algorithm,omitempty"`
	// Encoding of the signature: hex (default) or base64.
	Encoding string `yaml:"encoding,omitempty"`
	// Prefix stripped from the header value before decoding, e.g. "sha256=".
	Prefix string `yaml:"prefix,omitempty"`
}

// Config is the provider part of an integration's configuration.
type Config struct {
	// Provider names the signature scheme: standard, hmac (more in later releases).
	Provider string `yaml:"provider"`
	// Secrets are tried in order; any may match (rotation). At least one.
	Secrets []string `yaml:"secrets"`
	// Tolerance bounds the signed timestamp's distance from now where the
	// scheme signs one. Defaults to 5 minutes.
	Tolerance time.Duration `yaml:"tolerance,omitempty"`
	// EventID overrides where the event id comes from (required for hmac).
	EventID Field `yaml:"event_id,omitempty"`
	// EventType overrides where the event type comes from. Defaults per
	// provider (standard: body field "type").
	EventType Field `yaml:"event_type,omitempty"`
	// HMAC configures provider hmac.
	HMAC HMACConfig `yaml:"hmac,omitempty"`
}

// DefaultTolerance is the timestamp tolerance when Config.Tolerance is zero.
const DefaultTolerance = 5 * time.Minute

// Names lists the providers this build knows.
func Names() []string { return []string{"standard", "hmac"} }

// New builds the Verifier for cfg, validating it. Errors name the offending field.
func New(cfg Config) (Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	for i, s := range cfg.Secrets {
		if s == "" {
			return nil, fmt.Errorf("secrets[%d]: empty (is its ${ENV} variable set?)", i)
		}
	}
	if cfg.Tolerance < 0 {
		return nil, fmt.Errorf("tolerance: must not be negative")
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = DefaultTolerance
	}
	switch cfg.Provider {
	case "standard":
		return newStandard(cfg)
	case "hmac":
		return newHMAC(cfg)
	case "":
		return nil, fmt.Errorf("provider: required (one of %v)", Names())
	default:
		return nil, fmt.Errorf("provider: unknown %q (one of %v)", cfg.Provider, Names())
	}
}
