// Package config loads the one YAML file every Intake role reads.
//
// Load expands ${ENV} references inside string values (never in keys, and
// never by text substitution, so a secret containing YAML syntax stays a
// string), applies the DATABASE_URL and INTAKE_NATS_URL overrides, fills
// documented defaults and validates, with errors that name the field.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/intakehq/intake/pkg/provider"
)

// Config is the whole file. Every role reads the sections it needs.
type Config struct {
	NATS         NATS          `yaml:"nats"`
	Postgres     Postgres      `yaml:"postgres"`
	API          API           `yaml:"api"`
	Ingress      Ingress       `yaml:"ingress"`
	Processor    Processor     `yaml:"processor"`
	Outbox       Outbox        `yaml:"outbox"`
	Debug        Debug         `yaml:"debug"`
	Integrations []Integration `yaml:"integrations"`
}

// Debug configures diagnostics.
type Debug struct {
	// Pprof serves Go's profiler under /debug/pprof/ on every role's HTTP
	// listener. Defaults to false: profiles reveal internals, so turn it on
	// where the listener is not public (`intake bench` does, for its profiles).
	Pprof bool `yaml:"pprof"`
}

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
	// Defaults to 5s.
	PublishTimeout time.Duration `yaml:"publish_timeout"`
}

// Stream configures the JetStream streams.
type Stream struct {
	// Replicas per stream: 1 for a single server, 3 in production. Defaults to 1.
	Replicas int `yaml:"replicas"`
	// MaxAge is how long the raw log is kept for replay. Defaults to 720h (30 days).
	MaxAge time.Duration `yaml:"max_age"`
	// DuplicateWindow is how long JetStream remembers message ids. Each tracked
	// id costs roughly 125 bytes of server memory, so 10 minutes at 1,000
	// events/s is about 75 MB. Defaults to 10m. Later duplicates are caught by
	// the Postgres inbox instead.
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
	// MaxBytes caps each stream's size; when full, new publishes are refused
	// (discard new) and ingress answers 503 so the provider retries. Defaults
	// to -1 (unlimited; max_age bounds it).
	MaxBytes int64 `yaml:"max_bytes"`
}

// Postgres configures the database connection.
type Postgres struct {
	// URL of the database. Overridden by DATABASE_URL. Empty: `intake dev`
	// starts a private cluster from the PostgreSQL binaries on PATH.
	URL string `yaml:"url"`
	// MaxConns caps the pool. Defaults to 10.
	MaxConns int32 `yaml:"max_conns"`
}

// API configures the operator API.
type API struct {
	// Tokens that may call /api/v1. Without any, the API refuses every call.
	Tokens []Token `yaml:"tokens"`
}

// Role of an API token: viewer reads; operator also replays.
type Role string

// Roles.
const (
	RoleViewer   Role = "viewer"
	RoleOperator Role = "operator"
)

// Token is one bearer token of the operator API.
type Token struct {
	Name  string `yaml:"name"`
	Token string `yaml:"token"`
	Role  Role   `yaml:"role"`
}

// Ingress configures the HTTP receiver.
type Ingress struct {
	// Addr is the listen address of `intake ingress`. Defaults to ":8080".
	Addr string `yaml:"addr"`
	// Instance names this pod in delivery receipts. Defaults to the hostname.
	Instance string `yaml:"instance"`
	// ReadHeaderTimeout defaults to 5s; ReadTimeout and WriteTimeout to 30s.
	// They bound slow clients (slowloris) regardless of body size.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	// MaxBodyBytes is the default body limit for integrations that set none.
	// Defaults to 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
}

// Processor configures the consumer of INTAKE_IN.
type Processor struct {
	// AckWait is the ack deadline of the durable consumer. Defaults to 30s.
	// Batches that take longer than a third of it send InProgress.
	AckWait time.Duration `yaml:"ack_wait"`
	// MaxDeliver bounds deliveries of one message. Defaults to 10.
	MaxDeliver int `yaml:"max_deliver"`
	// BatchSize is the most messages one transaction commits. Defaults to 256.
	BatchSize int `yaml:"batch_size"`
	// BatchWait is how long a batch collects after its first message.
	// Defaults to 20ms: the latency a message may gain for group commit.
	BatchWait time.Duration `yaml:"batch_wait"`
	// Concurrency is the number of batches in flight. Defaults to 2.
	Concurrency int `yaml:"concurrency"`
	// Backoff is the wait before redelivery after a handler error, per
	// delivery; the last value repeats. Defaults to 1s, 5s, 30s, 2m, 10m.
	Backoff []time.Duration `yaml:"backoff"`
}

// Outbox configures the relay from the outbox table to INTAKE_OUT. A
// processor publishes its own rows right after each commit; the relay
// publishes the rows still pending after RelayAfter.
type Outbox struct {
	// PollInterval is how often the relay looks for pending rows. Defaults
	// to 1s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// RelayAfter is how long a row stays pending before the relay publishes
	// it (a processor that died or lost NATS after its commit). At most half
	// the streams' duplicate window, so that the relay's copy of a row the
	// processor published but did not get to mark still lands inside the
	// window and is dropped. Defaults to 5s (half the duplicate window if
	// that is shorter).
	RelayAfter time.Duration `yaml:"relay_after"`
	// BatchSize is the number of rows published per claim. Defaults to 500.
	BatchSize int `yaml:"batch_size"`
	// Retention is how long published rows stay in the table (for
	// redelivery from the outbox) before the relay deletes them. Defaults to 72h.
	Retention time.Duration `yaml:"retention"`
}

// Integration is one webhook endpoint: POST /webhooks/{name}.
type Integration struct {
	// Name is the URL segment and the first part of the scoped key.
	Name string `yaml:"name"`
	// Tenant owns the integration's events; it comes from here only, never
	// from a payload.
	Tenant string `yaml:"tenant"`
	// Account is the provider account scope of the dedup key. Optional.
	Account string `yaml:"account"`
	// MaxBodyBytes caps the body (413 above). Defaults to ingress.max_body_bytes.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// RateLimit caps requests per ingress instance (429 + Retry-After above
	// it). Defaults to no limit.
	RateLimit       RateLimit `yaml:"rate_limit"`
	provider.Config `yaml:",inline"`
}

// RateLimit is a token bucket: PerSecond requests per second on average,
// bursts of up to Burst. Each ingress instance keeps its own bucket, so the
// integration's total is the sum over instances.
type RateLimit struct {
	// PerSecond is the sustained rate. 0 (the default) disables the limit.
	PerSecond float64 `yaml:"per_second"`
	// Burst is the bucket size. Defaults to PerSecond rounded up (at least 1).
	Burst int `yaml:"burst"`
}

// Integration returns the integration named name.
func (c *Config) Integration(name string) (Integration, bool) {
	for _, in := range c.Integrations {
		if in.Name == name {
			return in, true
		}
	}
	return Integration{}, false
}

// Load reads, expands, overrides, defaults and validates the file at path.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := Parse(raw, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse is Load for bytes with an explicit environment lookup (tests).
func Parse(raw []byte, lookup func(string) (string, bool)) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if err := expandNode(&doc, lookup); err != nil {
		return nil, err
	}
	expanded, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, err
	}
	var cfg Config
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := yaml.NewDecoder(bytes.NewReader(expanded))
		dec.KnownFields(true) // a typo in a key is an error, not a silent default
		if err := dec.Decode(&cfg); err != nil {
			return nil, err
		}
	}
	if v, ok := lookup("DATABASE_URL"); ok && v != "" {
		cfg.Postgres.URL = v
	}
	if v, ok := lookup("INTAKE_NATS_URL"); ok && v != "" {
		cfg.NATS.URL = v
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expandNode replaces ${VAR} and ${VAR:-default} in scalar values. An unset
// variable without a default is an error: a silently empty secret is worse.
func expandNode(n *yaml.Node, lookup func(string) (string, bool)) error {
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		var missing []string
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
			m := envRef.FindStringSubmatch(ref)
			if v, ok := lookup(m[1]); ok {
				return v
			}
			if m[2] != "" {
				return m[3]
			}
			missing = append(missing, m[1])
			return ""
		})
		if len(missing) > 0 {
			return fmt.Errorf("line %d: environment variable %s is not set (use ${%s:-default} to allow empty)",
				n.Line, strings.Join(missing, ", "), missing[0])
		}
		n.Tag = "!!str" // an expanded value is a string even if it looks like a number
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		if err := expandNode(c, lookup); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) setDefaults() {
	setDur(&c.NATS.PublishTimeout, 5*time.Second)
	if c.NATS.Stream.Replicas == 0 {
		c.NATS.Stream.Replicas = 1
	}
	setDur(&c.NATS.Stream.MaxAge, 30*24*time.Hour)
	setDur(&c.NATS.Stream.DuplicateWindow, 10*time.Minute)
	if c.NATS.Stream.MaxBytes == 0 {
		c.NATS.Stream.MaxBytes = -1
	}
	if c.Postgres.MaxConns == 0 {
		c.Postgres.MaxConns = 10
	}
	if c.Ingress.Addr == "" {
		c.Ingress.Addr = ":8080"
	}
	if c.Ingress.Instance == "" {
		c.Ingress.Instance, _ = os.Hostname()
	}
	setDur(&c.Ingress.ReadHeaderTimeout, 5*time.Second)
	setDur(&c.Ingress.ReadTimeout, 30*time.Second)
	setDur(&c.Ingress.WriteTimeout, 30*time.Second)
	if c.Ingress.MaxBodyBytes == 0 {
		c.Ingress.MaxBodyBytes = 1 << 20
	}
	setDur(&c.Processor.AckWait, 30*time.Second)
	if c.Processor.MaxDeliver == 0 {
		c.Processor.MaxDeliver = 10
	}
	if c.Processor.Concurrency == 0 {
		c.Processor.Concurrency = 2
	}
	if c.Processor.BatchSize == 0 {
		c.Processor.BatchSize = 256
	}
	setDur(&c.Processor.BatchWait, 20*time.Millisecond)
	if len(c.Processor.Backoff) == 0 {
		c.Processor.Backoff = DefaultBackoff()
	}
	setDur(&c.Outbox.PollInterval, time.Second)
	// Half the duplicate window when that is shorter than 5s: a row the
	// processor published and the relay publishes again must be dropped.
	setDur(&c.Outbox.RelayAfter, min(5*time.Second, c.NATS.Stream.DuplicateWindow/2))
	if c.Outbox.BatchSize == 0 {
		c.Outbox.BatchSize = 500
	}
	setDur(&c.Outbox.Retention, 72*time.Hour)
	for i := range c.Integrations {
		in := &c.Integrations[i]
		if in.MaxBodyBytes == 0 {
			in.MaxBodyBytes = c.Ingress.MaxBodyBytes
		}
		if in.Tolerance == 0 {
			in.Tolerance = provider.DefaultTolerance
		}
		if in.RateLimit.PerSecond > 0 && in.RateLimit.Burst == 0 {
			in.RateLimit.Burst = max(1, int(math.Ceil(in.RateLimit.PerSecond)))
		}
	}
}

// DefaultBackoff is the redelivery backoff after handler errors.
func DefaultBackoff() []time.Duration {
	return []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}
}

func setDur(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Validate checks the whole configuration; the error lists every problem,
// each naming its field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.NATS.Stream.Replicas < 1 || c.NATS.Stream.Replicas > 5 {
		bad("nats.stream.replicas", "must be 1..5, got %d", c.NATS.Stream.Replicas)
	}
	if c.NATS.Stream.DuplicateWindow > c.NATS.Stream.MaxAge {
		bad("nats.stream.duplicate_window", "must not exceed nats.stream.max_age")
	}
	if c.NATS.PublishTimeout < 0 {
		bad("nats.publish_timeout", "must be positive")
	}
	if c.Postgres.MaxConns < 1 {
		bad("postgres.max_conns", "must be at least 1")
	}
	seenTok := map[string]bool{}
	for i, t := range c.API.Tokens {
		f := fmt.Sprintf("api.tokens[%d]", i)
		if t.Name == "" {
			bad(f+".name", "required")
		}
		if len(t.Token) < 16 {
			bad(f+".token", "must be at least 16 characters")
		}
		if seenTok[t.Token] && t.Token != "" {
			bad(f+".token", "duplicates another token")
		}
		seenTok[t.Token] = true
		if t.Role != RoleViewer && t.Role != RoleOperator {
			bad(f+".role", "must be viewer or operator, got %q", t.Role)
		}
	}
	if c.Ingress.MaxBodyBytes < 1 {
		bad("ingress.max_body_bytes", "must be positive")
	}
	if c.Processor.AckWait < time.Second {
		bad("processor.ack_wait", "must be at least 1s")
	}
	if c.Processor.MaxDeliver < 1 {
		bad("processor.max_deliver", "must be at least 1")
	}
	if c.Processor.Concurrency < 1 {
		bad("processor.concurrency", "must be at least 1")
	}
	if c.Processor.BatchSize < 1 || c.Processor.BatchSize > 4096 {
		bad("processor.batch_size", "must be 1..4096")
	}
	if c.Processor.BatchWait < 0 || c.Processor.BatchWait*10 > c.Processor.AckWait {
		bad("processor.batch_wait", "must be positive and at most a tenth of processor.ack_wait")
	}
	for i, d := range c.Processor.Backoff {
		if d <= 0 {
			bad(fmt.Sprintf("processor.backoff[%d]", i), "must be positive")
		}
	}
	if c.Outbox.BatchSize < 1 {
		bad("outbox.batch_size", "must be at least 1")
	}
	if c.Outbox.RelayAfter <= 0 || c.Outbox.RelayAfter > c.NATS.Stream.DuplicateWindow/2 {
		bad("outbox.relay_after", "must be positive and at most half of nats.stream.duplicate_window")
	}
	seen := map[string]bool{}
	for i, in := range c.Integrations {
		f := fmt.Sprintf("integrations[%d]", i)
		if in.Name != "" {
			f = fmt.Sprintf("integrations[%d] (%s)", i, in.Name)
		}
		if !nameRE.MatchString(in.Name) {
			bad(f+".name", "must be 1-64 of [A-Za-z0-9_-], got %q", in.Name)
		}
		if seen[in.Name] {
			bad(f+".name", "duplicate integration name")
		}
		seen[in.Name] = true
		if !nameRE.MatchString(in.Tenant) {
			bad(f+".tenant", "required, 1-64 of [A-Za-z0-9_-], got %q", in.Tenant)
		}
		if strings.ContainsAny(in.Account, "/ \t\n") || len(in.Account) > 128 {
			bad(f+".account", "must not contain '/' or spaces and be at most 128 characters")
		}
		if in.MaxBodyBytes < 1 {
			bad(f+".max_body_bytes", "must be positive")
		}
		if r := in.RateLimit; r.PerSecond < 0 || math.IsNaN(r.PerSecond) || math.IsInf(r.PerSecond, 0) {
			bad(f+".rate_limit.per_second", "must be a finite number ≥ 0 (0: no limit), got %v", r.PerSecond)
		}
		if r := in.RateLimit; r.Burst < 0 || (r.PerSecond == 0 && r.Burst != 0) {
			bad(f+".rate_limit.burst", "must be ≥ 1 and needs rate_limit.per_second")
		}
		if _, err := provider.New(in.Config); err != nil {
			errs = append(errs, fmt.Errorf("%s.%w", f, err))
		}
	}
	return errors.Join(errs...)
}
