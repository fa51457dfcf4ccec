package config

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"
)

// Destination is one HTTP service the dispatcher pushes processed events
// to (docs/destinations.md): each message of INTAKE_OUT the match selects is
// POSTed to URL, signed as Standard Webhooks, and retried on Retry until a
// 2xx.
type Destination struct {
	// Name identifies the destination in its durable consumer
	// ("dispatch-{name}"), the delivery log, metrics and the API. Required,
	// unique, [A-Za-z0-9_-]{1,64}.
	Name string `yaml:"name"`
	// URL is where deliveries are POSTed: absolute http or https, no
	// fragment. Required. Redirects are never followed.
	URL string `yaml:"url"`
	// Match selects the messages; empty (the default) is every message.
	Match DestinationMatch `yaml:"match"`
	// Secrets sign every delivery (Standard Webhooks: "whsec_" and the
	// base64 key); each one's signature is sent, so a receiver rotating
	// keys accepts either. At least one. A secret (DestinationSecrets):
	// only the dispatcher loads them.
	Secrets []string `yaml:"secrets"`
	// Timeout bounds one attempt: connect, request, response headers and
	// the (bounded) body. Defaults to DefaultDestinationTimeout (10s).
	Timeout time.Duration `yaml:"timeout"`
	// MaxInFlight is the most deliveries to this destination at once, per
	// dispatcher. Defaults to DefaultDestinationMaxInFlight (16).
	MaxInFlight int `yaml:"max_in_flight"`
	// Rate limits deliveries (attempts) per second, per dispatcher; unset
	// is no limit.
	Rate DestinationRate `yaml:"rate"`
	// Retry is the wait before each retry of a failed attempt (408, 429,
	// 5xx, a timeout, a broken connection); after the last the delivery is
	// failed. A Retry-After on 429 or 503 is honoured when longer, up to
	// MaxRetryAfter. Defaults to DefaultDestinationRetry() (5s, 1m, 5m,
	// 30m, 2h, 6h).
	Retry []time.Duration `yaml:"retry"`
	// RetryStatuses are further 4xx codes that retry instead of failing at
	// once (408 and 429 always retry). Empty (the default): every other
	// 4xx fails at once, since sending the same request again cannot mend
	// it.
	RetryStatuses []int `yaml:"retry_statuses"`
	// Breaker pauses the destination after failures in a row and probes it
	// until it answers again.
	Breaker DestinationBreaker `yaml:"breaker"`

	// secretsOmitted says the file was loaded without DestinationSecrets.
	secretsOmitted bool
}

// DestinationMatch selects INTAKE_OUT messages; an empty list matches any.
type DestinationMatch struct {
	// Tenants and Integrations become the consumer's subject filters.
	Tenants      []string `yaml:"tenants"`
	Integrations []string `yaml:"integrations"`
	// Types are path.Match patterns against the event type ("invoice.*");
	// a message of another type is acknowledged without a delivery.
	Types []string `yaml:"types"`
}

// DestinationRate is a destination's rate limit.
type DestinationRate struct {
	// PerSecond is the most attempts a second; 0 (the default) is none.
	PerSecond float64 `yaml:"per_second"`
	// Burst is how many attempts may go at once after a quiet spell.
	// Defaults to the destination's max_in_flight.
	Burst int `yaml:"burst"`
}

// DestinationBreaker is a destination's circuit breaker.
type DestinationBreaker struct {
	// Failures is how many failed attempts in a row (retryable ones:
	// timeouts, refused connections, 408, 429, 5xx) pause the destination.
	// Defaults to DefaultBreakerFailures (10).
	Failures int `yaml:"failures"`
	// Probe is the first wait before a paused destination is tried again
	// with one delivery; it doubles while the probes fail, up to
	// MaxBreakerProbe. Defaults to DefaultBreakerProbe (30s).
	Probe time.Duration `yaml:"probe"`
}

// Defaults and limits of a destination.
const (
	DefaultDestinationTimeout     = 10 * time.Second
	MaxDestinationTimeout         = 5 * time.Minute
	DefaultDestinationMaxInFlight = 16
	MaxDestinationMaxInFlight     = 1024
	DefaultBreakerFailures        = 10
	DefaultBreakerProbe           = 30 * time.Second
	MaxBreakerProbe               = 10 * time.Minute
	// BreakerProbeCeiling is how far failed probes double the wait: a
	// destination back from a long outage waits at most this (or probe,
	// when that is longer) for its next probe.
	BreakerProbeCeiling = 2 * time.Minute
	// MaxRetryAfter caps a destination's Retry-After: a receiver cannot
	// park its deliveries for longer than the longest default wait.
	MaxRetryAfter = 6 * time.Hour
	// MaxDestinationRetryWait bounds one retry wait: JetStream holds the
	// message in the consumer's pending set until then.
	MaxDestinationRetryWait = 24 * time.Hour
)

// DefaultDestinationRetry is destinations[].retry when unset. A function,
// so no caller can change the default.
func DefaultDestinationRetry() []time.Duration {
	return []time.Duration{5 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour}
}

// WithDefaults returns d with every unset field at its default.
func (d Destination) WithDefaults() Destination {
	setDefault(&d.Timeout, DefaultDestinationTimeout)
	setDefault(&d.MaxInFlight, DefaultDestinationMaxInFlight)
	if len(d.Retry) == 0 {
		d.Retry = DefaultDestinationRetry()
	}
	if d.Rate.PerSecond > 0 {
		setDefault(&d.Rate.Burst, d.MaxInFlight)
	}
	setDefault(&d.Breaker.Failures, DefaultBreakerFailures)
	setDefault(&d.Breaker.Probe, DefaultBreakerProbe)
	return d
}

// Durable is the name of the destination's consumer on INTAKE_OUT.
func (d Destination) Durable() string { return DestinationDurablePrefix + d.Name }

// DestinationDurablePrefix starts the name of every dispatcher's durable
// consumer: a durable with it that no destination names is removed.
const DestinationDurablePrefix = "dispatch-"

// Validate checks one destination; field is its place in the file
// ("destinations[0] (billing)"), which every error starts with.
// integrations is the set of integration names the file lists.
func (d Destination) Validate(field string, integrations map[string]bool) error {
	var p problems
	if !nameRE.MatchString(d.Name) {
		p.add(field+".name", "required, 1-64 of [A-Za-z0-9_-], got %q", d.Name)
	}
	if err := checkDestinationURL(d.URL); err != nil {
		p.add(field+".url", "%v", err)
	}
	if len(d.Secrets) == 0 && !d.secretsOmitted {
		p.add(field+".secrets", "at least one Standard Webhooks secret (whsec_ and the base64 key): every delivery is signed")
	}
	for i, s := range d.Secrets {
		if _, err := DecodeWebhookSecret(s); err != nil {
			p.add(fmt.Sprintf("%s.secrets[%d]", field, i), "%v", err)
		}
	}
	for i, in := range d.Match.Integrations {
		if !integrations[in] {
			p.add(fmt.Sprintf("%s.match.integrations[%d]", field, i), "no integration is named %q", in)
		}
	}
	for i, t := range d.Match.Tenants {
		if t == "" {
			p.add(fmt.Sprintf("%s.match.tenants[%d]", field, i), "must not be empty (omit tenants for every tenant)")
		}
	}
	for i, pat := range d.Match.Types {
		f := fmt.Sprintf("%s.match.types[%d]", field, i)
		if pat == "" {
			p.add(f, "must not be empty (omit types for every type)")
		} else if _, err := path.Match(pat, ""); err != nil {
			p.add(f, "%q is not a path.Match pattern: %v", pat, err)
		}
	}
	if d.Timeout <= 0 || d.Timeout > MaxDestinationTimeout {
		p.add(field+".timeout", "must be positive and at most %s, got %s", MaxDestinationTimeout, d.Timeout)
	}
	if d.MaxInFlight < 1 || d.MaxInFlight > MaxDestinationMaxInFlight {
		p.add(field+".max_in_flight", "must be between 1 and %d, got %d", MaxDestinationMaxInFlight, d.MaxInFlight)
	}
	if d.Rate.PerSecond < 0 {
		p.add(field+".rate.per_second", "must be positive (omit rate for no limit), got %g", d.Rate.PerSecond)
	}
	if d.Rate.Burst < 0 || (d.Rate.Burst > 0 && d.Rate.PerSecond == 0) {
		p.add(field+".rate.burst", "must be positive, and only with rate.per_second, got %d", d.Rate.Burst)
	}
	for i, w := range d.Retry {
		if w <= 0 || w > MaxDestinationRetryWait {
			p.add(fmt.Sprintf("%s.retry[%d]", field, i), "must be positive and at most %s, got %s", MaxDestinationRetryWait, w)
		}
	}
	for i, c := range d.RetryStatuses {
		if c < 400 || c > 499 {
			p.add(fmt.Sprintf("%s.retry_statuses[%d]", field, i), "must be a 4xx status (5xx always retries), got %d", c)
		}
	}
	if d.Breaker.Failures < 1 {
		p.add(field+".breaker.failures", "must be at least 1, got %d", d.Breaker.Failures)
	}
	if d.Breaker.Probe <= 0 || d.Breaker.Probe > MaxBreakerProbe {
		p.add(field+".breaker.probe", "must be positive and at most %s, got %s", MaxBreakerProbe, d.Breaker.Probe)
	}
	return p.err()
}

// checkDestinationURL accepts an absolute http or https URL with a host and
// no fragment; the scheme in lower case, as it is sent.
func checkDestinationURL(s string) error {
	if s == "" {
		return fmt.Errorf("required: where deliveries are POSTed (https://…)")
	}
	if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
		return fmt.Errorf("must start with https:// or http://")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("has no host")
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return fmt.Errorf("must not have a fragment")
	}
	return nil
}

// DecodeWebhookSecret returns the key of a Standard Webhooks secret,
// "whsec_" and the base64 of at least 24 bytes (the specification's
// minimum; generated ones are 32).
func DecodeWebhookSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return nil, fmt.Errorf("must be a Standard Webhooks secret: whsec_ and the base64 key")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("the part after whsec_ is not standard base64")
	}
	if len(key) < 24 {
		return nil, fmt.Errorf("the key is %d bytes; at least 24 (32 recommended)", len(key))
	}
	return key, nil
}

// validateDestinations checks each destination and that names are unique.
func validateDestinations(list []Destination, integrations []Integration) error {
	var p problems
	names := map[string]bool{}
	for _, in := range integrations {
		names[in.Name] = true
	}
	seen := map[string]bool{}
	for i, d := range list {
		field := fmt.Sprintf("destinations[%d] (%s)", i, d.Name)
		p.also(d.Validate(field, names))
		if seen[d.Name] {
			p.add(field+".name", "%q is used by another destination", d.Name)
		}
		seen[d.Name] = true
	}
	return p.err()
}

func destinationsWithDefaults(list []Destination) []Destination {
	if list == nil {
		return nil
	}
	out := make([]Destination, len(list))
	for i, d := range list {
		out[i] = d.WithDefaults()
	}
	return out
}
