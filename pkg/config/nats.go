package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// NATS configures the connection and the streams.
type NATS struct {
	// URL of an external NATS server. Empty: `intake dev` embeds one; other
	// roles require it. Overridden by INTAKE_NATS_URL.
	URL string `yaml:"url"`
	// Stream configures INTAKE_IN and INTAKE_OUT.
	Stream Stream `yaml:"stream"`
	// SyncAlways makes the embedded server (dev) fsync every write before its
	// PubAck. Defaults to false: then writes are fsynced every 2 minutes, and a
	// power loss can lose acknowledged events (on one node, and per the
	// Jepsen analysis of NATS 2.12.1 also in an R3 cluster). An external
	// server's own sync_interval decides there; deploy/nats/intake.conf sets
	// it to always.
	SyncAlways bool `yaml:"sync_always"`
	// PublishTimeout bounds ingress's wait for a PubAck before it answers 503.
	// Defaults to DefaultPublishTimeout (5s).
	PublishTimeout time.Duration `yaml:"publish_timeout"`

	// Credentials is a NATS credentials file (the user JWT and its nkey
	// seed, as `nsc` writes it) for servers run in operator mode. At most
	// one of credentials, nkey_seed and user/password. Defaults to none.
	Credentials string `yaml:"credentials"`
	// NkeySeed is a file holding an nkey seed ("SU…") for users configured
	// by nkey in the server's accounts. Defaults to none.
	NkeySeed string `yaml:"nkey_seed"`
	// User and Password authenticate by name; set them from the
	// environment ("${INTAKE_NATS_USER}", "${INTAKE_NATS_PASSWORD}"), never
	// inline. Both or neither. Default to none.
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// TLS verifies the server (and presents a client certificate when the
	// server asks for one).
	TLS NATSTLS `yaml:"tls"`
	// InboxPrefix is the start of the subjects a role receives its replies
	// (and pull deliveries) on; the role's name is appended
	// ("_INBOX_intake_ingress"), so a server can allow each role to
	// subscribe to its own replies only. Defaults to DefaultInboxPrefix.
	InboxPrefix string `yaml:"inbox_prefix"`
}

// NATSTLS is nats.tls: files, never inline PEM.
type NATSTLS struct {
	// CA is a PEM file of the authorities the server's certificate must
	// chain to. Defaults to the system roots (with a tls:// URL).
	CA string `yaml:"ca"`
	// Cert and Key are a PEM client certificate and its key, for servers
	// that verify clients. Both or neither. Default to none.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Defaults of nats.
const (
	// DefaultPublishTimeout is nats.publish_timeout when unset.
	DefaultPublishTimeout = 5 * time.Second
	// DefaultInboxPrefix is nats.inbox_prefix when unset; deploy/nats/intake.conf
	// allows each role "_INBOX_intake_<role>.>".
	DefaultInboxPrefix = "_INBOX_intake"
)

// WithDefaults returns n with every unset field at its default.
func (n NATS) WithDefaults() NATS {
	n.Stream = n.Stream.WithDefaults()
	setDefault(&n.PublishTimeout, DefaultPublishTimeout)
	setDefault(&n.InboxPrefix, DefaultInboxPrefix)
	return n
}

// Validate checks the section; errors name the YAML field. It reads the
// credential and TLS files, so a missing or unreadable one stops a role at
// start rather than at its first reconnect.
func (n NATS) Validate() error {
	var p problems
	p.also(n.Stream.Validate())
	if n.PublishTimeout <= 0 {
		p.add("nats.publish_timeout", "must be positive, got %s", n.PublishTimeout)
	}
	var methods []string
	if n.Credentials != "" {
		methods = append(methods, "nats.credentials")
		if err := checkCredentials(n.Credentials); err != nil {
			p.add("nats.credentials", "%v", err)
		}
	}
	if n.NkeySeed != "" {
		methods = append(methods, "nats.nkey_seed")
		if err := checkSeed(n.NkeySeed); err != nil {
			p.add("nats.nkey_seed", "%v", err)
		}
	}
	if n.User != "" || n.Password != "" {
		methods = append(methods, "nats.user/password")
		if n.User == "" || n.Password == "" {
			p.add("nats.user", "nats.user and nats.password go together (set both, from the environment)")
		}
	}
	if urlHasUserInfo(n.URL) {
		methods = append(methods, "credentials in nats.url")
	}
	if len(methods) > 1 {
		p.add("nats", "at most one authentication method, got %s", strings.Join(methods, ", "))
	}
	p.also(n.TLS.validate())
	switch {
	case n.InboxPrefix == "":
		p.add("nats.inbox_prefix", "must not be empty")
	case strings.ContainsAny(n.InboxPrefix, "*> \t\r\n") || strings.HasPrefix(n.InboxPrefix, ".") || strings.HasSuffix(n.InboxPrefix, "."):
		p.add("nats.inbox_prefix", "%q is not a subject prefix (no wildcards, spaces or leading/trailing dot)", n.InboxPrefix)
	}
	return p.err()
}

func (t NATSTLS) validate() error {
	var p problems
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			p.add("nats.tls.ca", "%v", err)
		} else if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			p.add("nats.tls.ca", "%s holds no PEM certificate", t.CA)
		}
	}
	switch {
	case (t.Cert == "") != (t.Key == ""):
		p.add("nats.tls.cert", "nats.tls.cert and nats.tls.key go together")
	case t.Cert != "":
		if _, err := tls.LoadX509KeyPair(t.Cert, t.Key); err != nil {
			p.add("nats.tls.cert", "%v", err)
		}
	}
	return p.err()
}

// urlHasUserInfo reports whether any of the comma-separated server URLs
// carries a user (nats://user:pass@host), itself an authentication method.
func urlHasUserInfo(urls string) bool {
	for _, raw := range strings.Split(urls, ",") {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
			return true
		}
	}
	return false
}

// checkCredentials reads a credentials file: a user JWT and a user seed.
func checkCredentials(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	token, err := nkeys.ParseDecoratedJWT(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := jwt.DecodeUserClaims(token); err != nil {
		return fmt.Errorf("%s: no user JWT: %w", path, err)
	}
	if _, err := nkeys.ParseDecoratedUserNKey(raw); err != nil {
		return fmt.Errorf("%s: no user seed: %w", path, err)
	}
	return nil
}

// checkSeed reads an nkey seed file.
func checkSeed(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	kp, err := nkeys.ParseDecoratedNKey(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	kp.Wipe()
	return nil
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
	// id costs the server about 450 bytes of RSS (measured: BENCHMARKS.md
	// "Soak") and an event is tracked on INTAKE_IN and INTAKE_OUT, so 10
	// minutes at 1,000 events/s is about 0.5 GB. Defaults to
	// DefaultDuplicateWindow (2m, NATS's own). It was 10m, until soaks at
	// 2,000–3,000 events/s showed ten minutes of ids making the server's
	// heap, and its garbage collector's cycles, the growing tail of
	// end-to-end latency (docs/scaling.md, "NATS memory"). Later duplicates
	// are caught by the Postgres inbox instead.
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
	DefaultDuplicateWindow = 2 * time.Minute
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
