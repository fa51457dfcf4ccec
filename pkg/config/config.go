// Package config loads the one YAML file every Intake role reads.
//
// Load expands ${ENV} references inside string values (never in keys, and
// never by text substitution, so a secret containing YAML syntax stays a
// string), applies the DATABASE_URL and INTAKE_NATS_URL overrides, fills
// documented defaults and validates, with errors that name the field.
// LoadFor keeps only the secrets one role uses (Secrets): the others are
// removed before expansion, so their variables need not be set there.
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Config is the whole file. Every role reads the sections it needs.
type Config struct {
	NATS         NATS          `yaml:"nats"`
	Postgres     Postgres      `yaml:"postgres"`
	API          API           `yaml:"api"`
	Ingress      Ingress       `yaml:"ingress"`
	HTTP         HTTP          `yaml:"http"`
	Processor    Processor     `yaml:"processor"`
	Outbox       Outbox        `yaml:"outbox"`
	Retention    Retention     `yaml:"retention"`
	Debug        Debug         `yaml:"debug"`
	Envelope     Envelope      `yaml:"envelope"`
	Integrations []Integration `yaml:"integrations"`
	// Handlers are SQL handlers run in the inbox transaction, first match
	// wins; none (the default): every event is forwarded.
	Handlers []Handler `yaml:"handlers"`
	// Destinations are the HTTP services the dispatcher pushes processed
	// events to (docs/destinations.md); none (the default): no pushes.
	Destinations []Destination `yaml:"destinations"`

	// omitted are the secrets ParseFor left out (Holds).
	omitted Secrets
}

// Debug configures diagnostics.
type Debug struct {
	// Pprof serves Go's profiler under /debug/pprof/ on every role's HTTP
	// listener (the internal one when http.internal_addr is set). Defaults to
	// false: profiles reveal internals, so turn it on where that listener is
	// not public (`intake bench` does, for its profiles).
	Pprof bool `yaml:"pprof"`
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
	return ParseFor(raw, lookup, AllSecrets)
}

// ParseFor is LoadFor for bytes with an explicit environment lookup.
func ParseFor(raw []byte, lookup func(string) (string, bool), want Secrets) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	omitSecrets(&doc, want)
	if err := expandNode(&doc, lookup); err != nil {
		return nil, err
	}
	if err := checkHandlerKeys(&doc); err != nil {
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
			return nil, hideValues(err)
		}
	}
	cfg.omitted = AllSecrets &^ want
	for i := range cfg.Integrations {
		cfg.Integrations[i].secretsOmitted = !cfg.Holds(WebhookSecrets)
	}
	cfg.Envelope.omitted = !cfg.Holds(EnvelopeKeys)
	for i := range cfg.Destinations {
		cfg.Destinations[i].secretsOmitted = !cfg.Holds(DestinationSecrets)
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

// quotedValue is how yaml quotes the offending value in a type error
// ("cannot unmarshal !!str `hunter2...` into int32").
var quotedValue = regexp.MustCompile("`[^`]*`")

// hideValues removes the values yaml quotes in type errors: the value in the
// wrong place may well be a secret, and the error is printed and logged.
func hideValues(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = quotedValue.ReplaceAllString(m, "(value not shown)")
	}
	return &yaml.TypeError{Errors: msgs}
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

// WithDefaults returns c with every unset field at its default, section by
// section (each section's WithDefaults). The copy shares no slice with c
// that defaulting writes to.
func (c Config) WithDefaults() Config {
	c.NATS = c.NATS.WithDefaults()
	c.Postgres = c.Postgres.WithDefaults()
	c.API = c.API.WithDefaults()
	c.Ingress = c.Ingress.WithDefaults()
	c.Processor = c.Processor.WithDefaults()
	c.Outbox = c.Outbox.WithDefaults(c.NATS.Stream.DuplicateWindow)
	c.Retention = c.Retention.WithDefaults()
	c.Envelope = c.Envelope.WithDefaults()
	c.Integrations = integrationsWithDefaults(c.Integrations, c.Ingress)
	c.Destinations = destinationsWithDefaults(c.Destinations)
	return c
}

func (c *Config) setDefaults() { *c = c.WithDefaults() }

// setDefault sets *v to def when it is the zero value (cmp.Or, in place):
// every section's WithDefaults fills its fields with it.
func setDefault[T comparable](v *T, def T) { *v = cmp.Or(*v, def) }

// Validate checks the whole configuration, section by section; the error
// lists every problem, each naming its field.
func (c *Config) Validate() error {
	var p problems
	p.also(c.NATS.Validate())
	p.also(c.Postgres.Validate())
	p.also(c.API.Validate())
	p.also(c.Ingress.Validate())
	p.also(c.HTTP.Validate())
	p.also(c.Processor.Validate())
	p.also(c.Outbox.Validate(c.NATS.Stream.DuplicateWindow))
	p.also(validateIntegrations(c.Integrations))
	p.also(validateHandlers(c.Handlers, c.Integrations))
	p.also(validateDestinations(c.Destinations, c.Integrations))
	p.also(c.Retention.Validate(c.NATS.Stream.MaxAge, c.Integrations))
	p.also(c.Envelope.Validate())
	if c.Processor.Shard != "" && len(c.Integrations) == 0 {
		// A shard's consumers filter on its integrations: with none they
		// would have nothing to filter on.
		p.add("processor.shard", "a shard consumes the integrations its config lists, and this config lists none")
	}
	for i, in := range c.Integrations {
		// An undeclared length reserves the limit plus one byte of the
		// in-flight budget: a limit the budget cannot hold would be 503 on
		// every retry, never a delivery.
		if in.MaxBodyBytes >= c.Ingress.MaxInflightBodyBytes && c.Ingress.MaxInflightBodyBytes > 0 {
			p.add(fmt.Sprintf("integrations[%d] (%s).max_body_bytes", i, in.Name),
				"must be below ingress.max_inflight_body_bytes (%d), got %d", c.Ingress.MaxInflightBodyBytes, in.MaxBodyBytes)
		}
	}
	return p.err()
}
