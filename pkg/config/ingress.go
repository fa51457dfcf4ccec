package config

import (
	"os"
	"time"
)

// Ingress configures the HTTP receiver.
type Ingress struct {
	// Addr is the listen address of `intake ingress`. Defaults to
	// DefaultIngressAddr (":8080").
	Addr string `yaml:"addr"`
	// Instance names this pod in delivery receipts. Defaults to the hostname.
	Instance string `yaml:"instance"`
	// ReadHeaderTimeout, ReadTimeout and WriteTimeout bound slow clients
	// (slowloris) regardless of body size. They default to
	// DefaultReadHeaderTimeout (5s), DefaultReadTimeout (30s) and
	// DefaultWriteTimeout (30s).
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	// MaxBodyBytes is the default body limit for integrations that set none.
	// Defaults to DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
}

// Defaults of the ingress section.
const (
	DefaultIngressAddr       = ":8080"
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultMaxBodyBytes      = 1 << 20
)

// WithDefaults returns in with every unset field at its default.
func (in Ingress) WithDefaults() Ingress {
	setDefault(&in.Addr, DefaultIngressAddr)
	if in.Instance == "" {
		in.Instance, _ = os.Hostname()
	}
	setDefault(&in.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	setDefault(&in.ReadTimeout, DefaultReadTimeout)
	setDefault(&in.WriteTimeout, DefaultWriteTimeout)
	setDefault(&in.MaxBodyBytes, DefaultMaxBodyBytes)
	return in
}

// Validate checks the section; errors name the YAML field.
func (in Ingress) Validate() error {
	var p problems
	for _, t := range []struct {
		field string
		d     time.Duration
	}{
		{"ingress.read_header_timeout", in.ReadHeaderTimeout},
		{"ingress.read_timeout", in.ReadTimeout},
		{"ingress.write_timeout", in.WriteTimeout},
	} {
		if t.d <= 0 {
			p.add(t.field, "must be positive, got %s", t.d)
		}
	}
	if in.MaxBodyBytes < 1 {
		p.add("ingress.max_body_bytes", "must be positive")
	}
	return p.err()
}
