package config

import "time"

// NATS configures the connection and the streams.
type NATS struct {
	// URL of an external NATS server. Empty: `intake dev` embeds one; other
	// roles require it. Overridden by INTAKE_NATS_URL.
	URL string `yaml:"url"`
	// Stream configures INTAKE_IN and INTAKE_OUT.
	Stream Stream `yaml:"stream"`
	// SyncAlways makes the embedded server (dev) fsync every write before its
	// PubAck. Defaults to false: then writes are fsynced every 2 minutes and an
	// acknowledged event can be lost on power loss of a single node.
	SyncAlways bool `yaml:"sync_always"`
	// PublishTimeout bounds ingress's wait for a PubAck before it answers 503.
	// Defaults to DefaultPublishTimeout (5s).
	PublishTimeout time.Duration `yaml:"publish_timeout"`
}

// DefaultPublishTimeout is nats.publish_timeout when unset.
const DefaultPublishTimeout = 5 * time.Second

// WithDefaults returns n with every unset field at its default.
func (n NATS) WithDefaults() NATS {
	n.Stream = n.Stream.WithDefaults()
	setDefault(&n.PublishTimeout, DefaultPublishTimeout)
	return n
}

// Validate checks the section; errors name the YAML field.
func (n NATS) Validate() error {
	var p problems
	p.also(n.Stream.Validate())
	if n.PublishTimeout <= 0 {
		p.add("nats.publish_timeout", "must be positive, got %s", n.PublishTimeout)
	}
	return p.err()
}

// Stream configures the JetStream streams.
type Stream struct {
	// Replicas per stream: 1 for a single server, 3 in production. Defaults
	// to DefaultReplicas (1).
	Replicas int `yaml:"replicas"`
	// MaxAge is how long the raw log is kept for replay. Defaults to
	// DefaultMaxAge (720h, 30 days).
	MaxAge time.Duration `yaml:"max_age"`
	// DuplicateWindow is how long JetStream remembers message ids. Each tracked
	// id costs roughly 125 bytes of server memory, so 10 minutes at 1,000
	// events/s is about 75 MB. Defaults to DefaultDuplicateWindow (10m). Later
	// duplicates are caught by the Postgres inbox instead.
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
	// MaxBytes caps each stream's size; when full, new publishes are refused
	// (discard new) and ingress answers 503 so the provider retries. Defaults
	// to DefaultMaxBytes (-1: unlimited; max_age bounds it).
	MaxBytes int64 `yaml:"max_bytes"`
}

// Defaults of nats.stream.
const (
	DefaultReplicas        = 1
	DefaultMaxAge          = 30 * 24 * time.Hour
	DefaultDuplicateWindow = 10 * time.Minute
	DefaultMaxBytes        = -1
	// MaxReplicas is the most replicas JetStream supports per stream.
	MaxReplicas = 5
)

// WithDefaults returns s with every unset field at its default.
func (s Stream) WithDefaults() Stream {
	setDefault(&s.Replicas, DefaultReplicas)
	setDefault(&s.MaxAge, DefaultMaxAge)
	setDefault(&s.DuplicateWindow, DefaultDuplicateWindow)
	setDefault(&s.MaxBytes, DefaultMaxBytes)
	return s
}

// Validate checks the section; errors name the YAML field.
func (s Stream) Validate() error {
	var p problems
	if s.Replicas < 1 || s.Replicas > MaxReplicas {
		p.add("nats.stream.replicas", "must be 1..%d, got %d", MaxReplicas, s.Replicas)
	}
	if s.MaxAge <= 0 {
		p.add("nats.stream.max_age", "must be positive, got %s", s.MaxAge)
	}
	if s.DuplicateWindow <= 0 {
		p.add("nats.stream.duplicate_window", "must be positive, got %s", s.DuplicateWindow)
	} else if s.DuplicateWindow > s.MaxAge {
		p.add("nats.stream.duplicate_window", "must not exceed nats.stream.max_age")
	}
	if s.MaxBytes < 1 && s.MaxBytes != -1 {
		p.add("nats.stream.max_bytes", "must be positive, or -1 for no limit, got %d", s.MaxBytes)
	}
	return p.err()
}

// setDefault sets *v to def when it is the zero value.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
