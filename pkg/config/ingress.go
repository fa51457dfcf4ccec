package config

import (
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/intakehq/intake/internal/httpserver"
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
	// Defaults to DefaultMaxBodyBytes (1 MiB); an integration that takes
	// that default (neither it nor this sets one) is lowered by ingress to
	// the NATS server's max_payload less ingress.HeaderAllowance (64 KiB)
	// when it would not fit, as with a stock nats-server (max_payload 1 MB).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxInflightBodyBytes caps the bytes of request bodies one ingress
	// process holds at once; a request that does not fit is answered 503 +
	// Retry-After before its body is read. Defaults to
	// DefaultMaxInflightBodyBytes (16 MiB).
	MaxInflightBodyBytes int64 `yaml:"max_inflight_body_bytes"`
	// MaxConnections caps the open connections of every role's public
	// listener (a replayer's console too, not only ingress's); one more is
	// answered 503 + Retry-After and closed. Defaults to
	// DefaultMaxConnections (2048).
	MaxConnections int `yaml:"max_connections"`
	// MaxJSONDepth is the deepest nesting of JSON arrays and objects a body
	// may have (400 above), checked by a byte scan before anything parses
	// it. Defaults to DefaultMaxJSONDepth (64).
	MaxJSONDepth int `yaml:"max_json_depth"`
	// ClientRateLimit is the per-client-address limit charged before the
	// signature check; a delivery that verifies gets its token back, so it
	// limits unsigned and badly signed requests only.
	ClientRateLimit ClientRateLimit `yaml:"client_rate_limit"`
	// TrustedProxies are the addresses or CIDR prefixes of proxies whose
	// ClientIPHeader names the client. Defaults to none: the TCP peer is the
	// client.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// ClientIPHeader names the client when the TCP peer is a trusted proxy
	// (X-Forwarded-For style: the rightmost address that is not a trusted
	// proxy). Defaults to "" (not read).
	ClientIPHeader string `yaml:"client_ip_header"`

	// maxBodyDefaulted says MaxBodyBytes was unset and took its default;
	// integrations that set none inherit it (Integration.MaxBodyBytesDefaulted).
	maxBodyDefaulted bool
}

// ClientRateLimit is a token bucket per client address (IPv6: per /64).
type ClientRateLimit struct {
	// PerSecond is the sustained rate of unverified requests an address may
	// send. Defaults to DefaultClientPerSecond (20); -1 disables the limit.
	PerSecond float64 `yaml:"per_second"`
	// Burst is the bucket size. Defaults to DefaultClientBurst (40).
	Burst int `yaml:"burst"`
	// MaxClients bounds the addresses tracked at once (memory); when full,
	// idle addresses are forgotten first. Defaults to DefaultMaxClients
	// (16384).
	MaxClients int `yaml:"max_clients"`
}

// Defaults of the ingress section.
const (
	DefaultIngressAddr       = ":8080"
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultMaxBodyBytes      = 1 << 20
	// DefaultMaxInflightBodyBytes and DefaultMaxConnections keep ingress's
	// RSS well under 200 MB at GOGC=400 (the role's setting): bodies are
	// held about twice (read buffer, publish buffer), garbage up to 5× live.
	DefaultMaxInflightBodyBytes = 16 << 20
	DefaultMaxConnections       = 2048
	DefaultMaxJSONDepth         = 64
	DefaultClientPerSecond      = 20
	DefaultClientBurst          = 40
	DefaultMaxClients           = 16384
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
	if in.MaxBodyBytes == 0 {
		in.MaxBodyBytes, in.maxBodyDefaulted = DefaultMaxBodyBytes, true
	}
	setDefault(&in.MaxInflightBodyBytes, DefaultMaxInflightBodyBytes)
	setDefault(&in.MaxConnections, DefaultMaxConnections)
	setDefault(&in.MaxJSONDepth, DefaultMaxJSONDepth)
	setDefault(&in.ClientRateLimit.PerSecond, DefaultClientPerSecond)
	setDefault(&in.ClientRateLimit.Burst, DefaultClientBurst)
	setDefault(&in.ClientRateLimit.MaxClients, DefaultMaxClients)
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
	if in.MaxBodyBytes < 1 || in.MaxBodyBytes > MaxBodyBytesLimit {
		p.add("ingress.max_body_bytes", "must be 1..%d (1 GiB), got %d", MaxBodyBytesLimit, in.MaxBodyBytes)
	}
	if in.MaxInflightBodyBytes <= in.MaxBodyBytes {
		p.add("ingress.max_inflight_body_bytes", "must be above ingress.max_body_bytes (%d), got %d", in.MaxBodyBytes, in.MaxInflightBodyBytes)
	}
	if in.MaxConnections < 1 {
		p.add("ingress.max_connections", "must be positive, got %d", in.MaxConnections)
	}
	if in.MaxJSONDepth < 1 {
		p.add("ingress.max_json_depth", "must be positive, got %d", in.MaxJSONDepth)
	}
	if r := in.ClientRateLimit; r.PerSecond != -1 && !(r.PerSecond > 0 && r.PerSecond < 1e9) {
		p.add("ingress.client_rate_limit.per_second", "must be positive (or -1: no limit), got %v", r.PerSecond)
	}
	if in.ClientRateLimit.Burst < 1 {
		p.add("ingress.client_rate_limit.burst", "must be positive, got %d", in.ClientRateLimit.Burst)
	}
	if in.ClientRateLimit.MaxClients < 1 {
		p.add("ingress.client_rate_limit.max_clients", "must be positive, got %d", in.ClientRateLimit.MaxClients)
	}
	if _, err := in.TrustedPrefixes(); err != nil {
		p.add("ingress.trusted_proxies", "%v", err)
	}
	if len(in.TrustedProxies) > 0 && in.ClientIPHeader == "" {
		p.add("ingress.client_ip_header", "required with ingress.trusted_proxies")
	}
	return p.err()
}

// TrustedPrefixes parses TrustedProxies: an address is a one-address prefix.
func (in Ingress) TrustedPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range in.TrustedProxies {
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, err
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		pf, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, pf.Masked())
	}
	return out, nil
}

// Timeouts are the HTTP server timeouts, defaulted, that every role's
// listener is built with (httpserver.New).
func (c Ingress) Timeouts() httpserver.Timeouts {
	c = c.WithDefaults()
	return httpserver.Timeouts{ReadHeader: c.ReadHeaderTimeout, Read: c.ReadTimeout, Write: c.WriteTimeout}
}
