package config

import (
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Secrets is a set of the config's secrets that one role uses and the
// others need not hold: a role loads the file with only its own (LoadFor),
// so an unset ${VAR} of another role's secret does not stop it, and a
// compromised ingress holds no operator token.
type Secrets uint8

const (
	// WebhookSecrets are integrations[].secrets: ingress verifies
	// deliveries with them (and `intake send` signs with them).
	WebhookSecrets Secrets = 1 << iota
	// APITokens are api.tokens: the replayer authenticates operators with
	// them.
	APITokens
	// EnvelopeKeys are envelope.keys: ingress signs envelopes with them,
	// the processor verifies them.
	EnvelopeKeys
	// DestinationSecrets are destinations[].secrets: the dispatcher signs
	// deliveries with them.
	DestinationSecrets

	// NoSecrets is what `intake migrate` loads.
	NoSecrets Secrets = 0
	// AllSecrets is what Load loads (`intake dev`, one process of every
	// role).
	AllSecrets = WebhookSecrets | APITokens | EnvelopeKeys | DestinationSecrets
)

// String names the secrets in s the way the Go code spells them.
func (s Secrets) String() string {
	switch s {
	case NoSecrets:
		return "config.NoSecrets"
	case AllSecrets:
		return "config.AllSecrets"
	}
	var names []string
	for _, k := range []struct {
		s    Secrets
		name string
	}{{WebhookSecrets, "config.WebhookSecrets"}, {APITokens, "config.APITokens"}, {EnvelopeKeys, "config.EnvelopeKeys"}, {DestinationSecrets, "config.DestinationSecrets"}} {
		if s&k.s != 0 {
			names = append(names, k.name)
		}
	}
	return strings.Join(names, "|")
}

// LoadFor is Load keeping only the secrets in want: the others are removed
// from the file before ${VAR} expansion, so their variables need not be set
// and their values never reach the process.
func LoadFor(path string, want Secrets) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := ParseFor(raw, os.LookupEnv, want)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Holds reports whether c was loaded with every secret in s. A Config built
// in code (not by ParseFor) holds them all.
func (c *Config) Holds(s Secrets) bool { return c.omitted&s == 0 }

// omitSecrets removes from doc (the parsed file) the secrets not in want:
// api.tokens, envelope.keys, and the secrets of every integration.
func omitSecrets(doc *yaml.Node, want Secrets) {
	if want == AllSecrets {
		return
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		switch v := doc.Content[i+1]; doc.Content[i].Value {
		case "api":
			if want&APITokens == 0 {
				deleteKey(v, "tokens")
			}
		case "envelope":
			if want&EnvelopeKeys == 0 {
				deleteKey(v, "keys")
			}
		case "integrations":
			if want&WebhookSecrets == 0 && v.Kind == yaml.SequenceNode {
				for _, in := range v.Content {
					deleteKey(in, "secrets")
				}
			}
		case "destinations":
			if want&DestinationSecrets == 0 && v.Kind == yaml.SequenceNode {
				for _, d := range v.Content {
					deleteKey(d, "secrets")
				}
			}
		}
	}
}

// deleteKey removes key and its value from the mapping m.
func deleteKey(m *yaml.Node, key string) {
	if m.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}
