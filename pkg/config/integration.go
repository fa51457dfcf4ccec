package config

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/intakehq/intake/pkg/provider"
)

// Integration is one webhook endpoint: POST /webhooks/{name}.
type Integration struct {
	// Name is the URL segment and the first part of the scoped key.
	Name string `yaml:"name"`
	// Tenant owns the integration's events; it comes from here only, never
	// from a payload.
	Tenant string `yaml:"tenant"`
	// Account is the provider account scope of the dedup key. Optional.
	Account string `yaml:"account"`
	// MaxBodyBytes caps the body (413 above). Defaults to
	// ingress.max_body_bytes; when neither is set, to DefaultMaxBodyBytes or
	// what fits the NATS server, whichever is less (see Ingress.MaxBodyBytes).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// RateLimit caps requests per ingress instance (429 + Retry-After above
	// it). Defaults to no limit.
	RateLimit RateLimit `yaml:"rate_limit"`
	// ReplayGuard refuses a body the integration already accepted under
	// another event id (see GuardsReplays and docs/providers.md). Defaults
	// per provider: on where the signature covers the body but not the id
	// and no timestamp bounds a replay (github, shopify, hmac whose event id
	// comes from an unsigned header); off for the others.
	ReplayGuard *bool `yaml:"replay_guard"`
	// InboxRetention keeps this integration's inbox keys (and its replay
	// guard records) longer than retention.inbox. Optional; the same floors
	// apply (see Retention.Inbox).
	InboxRetention time.Duration `yaml:"inbox_retention"`
	// Config is the signature scheme and its options. Tolerance defaults to
	// provider.DefaultTolerance (5m).
	provider.Config `yaml:",inline"`

	// maxBodyDefaulted says neither this integration nor
	// ingress.max_body_bytes set MaxBodyBytes (MaxBodyBytesDefaulted).
	maxBodyDefaulted bool
	// secretsOmitted says the file was loaded without WebhookSecrets
	// (ParseFor): Validate does not ask for them.
	secretsOmitted bool
}

// MaxBodyBytesDefaulted reports whether MaxBodyBytes is DefaultMaxBodyBytes
// because neither the integration nor ingress.max_body_bytes set one:
// ingress.New may then lower it to fit the NATS server's max_payload, while
// a limit the file sets must fit or ingress refuses to start.
func (in Integration) MaxBodyBytesDefaulted() bool {
	return in.maxBodyDefaulted && in.MaxBodyBytes == DefaultMaxBodyBytes
}

// GuardsReplays reports whether the processor refuses, in this integration,
// a body already accepted under another event id: replay_guard when set,
// else the provider's default (ReplayGuardDefault).
func (in Integration) GuardsReplays() bool {
	if in.ReplayGuard != nil {
		return *in.ReplayGuard
	}
	return ReplayGuardDefault(in.Config)
}

// ReplayGuardDefault is replay_guard's default for a provider configuration:
// true where the event id is not signed and no signed timestamp bounds a
// replay — github (X-GitHub-Delivery), shopify (X-Shopify-Event-Id), hmac
// with event_id from a header its template does not sign, pairs and pubkey
// with event_id from a header (never signed there), and token and basic,
// which sign nothing. standard, svix, stripe and slack sign the id (or carry
// it in the signed body) and a timestamp: a captured body cannot come back
// under a new id. A preset takes its family's default (provider.Resolve).
func ReplayGuardDefault(c provider.Config) bool {
	if r, err := provider.Resolve(c); err == nil {
		c = r
	}
	switch c.Provider {
	case "github", "shopify", "token", "basic", "mailgun", "twilio", "paypal":
		// mailgun: the signature covers a timestamp and a token, not the
		// body that carries the id; twilio: the id is an unsigned header;
		// paypal: the signature covers a CRC32 of the body, no hash.
		return true
	case "hmac":
		return c.EventID.Header != "" && !strings.Contains(c.HMAC.Template, "{id}")
	case "pairs", "pubkey":
		return c.EventID.Header != ""
	}
	return false
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

// MaxAccountLength is the longest integrations[].account accepted.
const MaxAccountLength = 128

// MaxBodyBytesLimit bounds every body limit: a webhook is no file upload,
// and sizes past it would only overflow the reservations made for them.
const MaxBodyBytesLimit = 1 << 30

// WithDefaults returns in with every unset field at its default; ingress is
// the defaulted ingress section, whose max_body_bytes is the body limit's.
func (in Integration) WithDefaults(ingress Ingress) Integration {
	if in.MaxBodyBytes == 0 {
		in.MaxBodyBytes, in.maxBodyDefaulted = ingress.MaxBodyBytes, ingress.maxBodyDefaulted
	}
	setDefault(&in.Tolerance, provider.DefaultTolerance)
	if in.RateLimit.PerSecond > 0 && in.RateLimit.Burst == 0 {
		in.RateLimit.Burst = max(1, int(math.Ceil(in.RateLimit.PerSecond)))
	}
	return in
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Validate checks one integration; field is its place in the file (such as
// "integrations[0] (stripe-live)"), which every error starts with.
func (in Integration) Validate(field string) error {
	var p problems
	if !nameRE.MatchString(in.Name) {
		p.add(field+".name", "must be 1-64 of [A-Za-z0-9_-], got %q", in.Name)
	}
	if !nameRE.MatchString(in.Tenant) {
		p.add(field+".tenant", "required, 1-64 of [A-Za-z0-9_-], got %q", in.Tenant)
	}
	if strings.ContainsAny(in.Account, "/ \t\n") || len(in.Account) > MaxAccountLength {
		p.add(field+".account", "must not contain '/' or spaces and be at most %d characters", MaxAccountLength)
	}
	if in.MaxBodyBytes < 1 || in.MaxBodyBytes > MaxBodyBytesLimit {
		p.add(field+".max_body_bytes", "must be 1..%d (1 GiB), got %d", MaxBodyBytesLimit, in.MaxBodyBytes)
	}
	if r := in.RateLimit; r.PerSecond < 0 || math.IsNaN(r.PerSecond) || math.IsInf(r.PerSecond, 0) {
		p.add(field+".rate_limit.per_second", "must be a finite number ≥ 0 (0: no limit), got %v", r.PerSecond)
	}
	if r := in.RateLimit; r.Burst < 0 || (r.PerSecond == 0 && r.Burst != 0) {
		p.add(field+".rate_limit.burst", "must be ≥ 1 and needs rate_limit.per_second")
	}
	if in.secretsOmitted {
		// A role without the secrets verifies nothing; ingress checks the
		// scheme's options, which it loads with them.
		if !slices.Contains(provider.Names(), in.Provider) {
			p.add(field+".provider", "unknown %q (one of %v)", in.Provider, provider.Names())
		}
	} else if _, err := provider.New(in.Config); err != nil {
		p.also(fmt.Errorf("%s.%w", field, err))
	}
	return p.err()
}

// integrationsWithDefaults returns a defaulted copy of list; ingress is the
// defaulted ingress section.
func integrationsWithDefaults(list []Integration, ingress Ingress) []Integration {
	if list == nil {
		return nil
	}
	out := make([]Integration, len(list))
	for i, in := range list {
		out[i] = in.WithDefaults(ingress)
	}
	return out
}

// validateIntegrations checks each integration and that names are unique.
func validateIntegrations(list []Integration) error {
	var p problems
	seen := map[string]bool{}
	for i, in := range list {
		f := fmt.Sprintf("integrations[%d]", i)
		if in.Name != "" {
			f = fmt.Sprintf("integrations[%d] (%s)", i, in.Name)
		}
		p.also(in.Validate(f))
		if seen[in.Name] {
			p.add(f+".name", "duplicate integration name")
		}
		seen[in.Name] = true
	}
	return p.err()
}
