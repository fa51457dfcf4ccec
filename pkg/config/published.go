package config

import (
	"crypto/sha256"
	"fmt"
	"net/url"
	"strings"
)

// Published maps a secret value the Intake repository publishes to where it
// is published (ExamplePath). Anyone can read those values, so a
// production role must not run with them: they are for `intake dev` only.
type Published map[string]string

// PublishedDefaults returns the non-empty defaults of the ${VAR:-default}
// references in raw (a config file shipped with Intake), each published in
// source. The list is derived from the file itself, so it cannot drift from
// what the repository ships.
func PublishedDefaults(raw []byte, source string) Published {
	p := Published{}
	for _, m := range envRef.FindAllSubmatch(raw, -1) {
		if m[2] != nil && len(m[3]) > 0 {
			p[string(m[3])] = source
		}
	}
	return p
}

// CheckNoPublishedSecrets fails when a signing secret, an envelope key, an API token or a
// NATS or Postgres URL password of c is one the repository publishes (the
// defaults of Example); see checkPublished.
func (c *Config) CheckNoPublishedSecrets() error {
	return c.checkPublished(PublishedDefaults(Example, ExamplePath))
}

// checkPublished fails when a signing secret, an API token or a
// NATS or Postgres URL password of c is one of published; the error names
// every such key (never the value). Production roles call it at start;
// `intake dev` does not, so the example config runs out of the box.
func (c *Config) checkPublished(published Published) error {
	var p problems
	check := func(field, value string) {
		if src, ok := published[value]; ok && value != "" {
			p.add(field, "is a value published in the Intake repository (%s); set your own", src)
		}
	}
	for i, t := range c.API.Tokens {
		if t.TokenSHA256 == "" {
			check(fmt.Sprintf("api.tokens[%d] (%s).token", i, t.Name), t.Token)
			continue
		}
		for v := range published { // the digest of a published token is no better
			if sha256.Sum256([]byte(v)) == t.Sum() {
				check(fmt.Sprintf("api.tokens[%d] (%s).token_sha256", i, t.Name), v)
			}
		}
	}
	for i, in := range c.Integrations {
		for j, s := range in.Secrets {
			// Standard Webhooks and Svix take their key with or without the
			// whsec_ prefix: the same key either way.
			for _, v := range []string{s, strings.TrimPrefix(s, "whsec_"), "whsec_" + s} {
				if _, ok := published[v]; ok {
					check(fmt.Sprintf("integrations[%d] (%s).secrets[%d]", i, in.Name, j), v)
					break
				}
			}
		}
	}
	for i, d := range c.Destinations {
		for j, s := range d.Secrets {
			check(fmt.Sprintf("destinations[%d] (%s).secrets[%d]", i, d.Name, j), s)
		}
	}
	for i, k := range c.Envelope.Keys {
		check(fmt.Sprintf("envelope.keys[%d]", i), k)
	}
	check("postgres.url (or DATABASE_URL) password", urlPassword(c.Postgres.URL))
	check("nats.url (or INTAKE_NATS_URL) password", urlPassword(c.NATS.URL))
	check("nats.password", c.NATS.Password)
	return p.err()
}

// urlPassword is the password of a URL ("" when there is none or it does
// not parse).
func urlPassword(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return ""
	}
	pw, _ := u.User.Password()
	return pw
}
