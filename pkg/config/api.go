package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// API configures the operator API and the replayer behind it.
type API struct {
	// Tokens that may call /api/v1. Without any, the API refuses every call.
	Tokens []Token `yaml:"tokens"`
	// RedriveInterval is how often the replayer looks for events the
	// processor acknowledged whose inbox row is gone (a commit lost in a
	// Postgres failover) and replays them. Defaults to
	// DefaultRedriveInterval (1m); negative turns re-driving off.
	RedriveInterval time.Duration `yaml:"redrive_interval"`
	// RedriveLookback is how far back a re-drive pass looks at start and
	// after a failover: at least the replication lag a failover can lose.
	// Defaults to DefaultRedriveLookback (10m).
	RedriveLookback time.Duration `yaml:"redrive_lookback"`
}

// Defaults of the api section.
const (
	DefaultRedriveInterval = time.Minute
	DefaultRedriveLookback = 10 * time.Minute
)

// WithDefaults returns a with every unset field at its default.
func (a API) WithDefaults() API {
	setDefault(&a.RedriveInterval, DefaultRedriveInterval)
	setDefault(&a.RedriveLookback, DefaultRedriveLookback)
	return a
}

// Role of an API token: viewer reads; operator also replays.
type Role string

// Roles.
const (
	RoleViewer   Role = "viewer"
	RoleOperator Role = "operator"
)

// Token is one bearer token of the operator API, given either as the token
// itself or as the hex SHA-256 of it (so the config file need not hold the
// token: `printf %s "$TOKEN" | sha256sum`). Exactly one of the two.
type Token struct {
	Name        string `yaml:"name"`
	Token       string `yaml:"token"`
	TokenSHA256 string `yaml:"token_sha256"`
	Role        Role   `yaml:"role"`
}

// Sum is the SHA-256 the API compares a presented token's digest with
// (zero when the token is invalid: Validate reports it).
func (t Token) Sum() [sha256.Size]byte {
	if t.TokenSHA256 == "" {
		return sha256.Sum256([]byte(t.Token))
	}
	var sum [sha256.Size]byte
	_, _ = hex.Decode(sum[:], []byte(t.TokenSHA256))
	return sum
}

// MinTokenLength is the shortest bearer token api.tokens accepts.
const MinTokenLength = 16

// Validate checks the section; errors name the YAML field.
func (a API) Validate() error {
	var p problems
	if a.RedriveLookback <= 0 {
		p.add("api.redrive_lookback", "must be positive, got %s", a.RedriveLookback)
	}
	seen := map[[sha256.Size]byte]bool{}
	for i, t := range a.Tokens {
		f := fmt.Sprintf("api.tokens[%d]", i)
		if t.Name == "" {
			p.add(f+".name", "required")
		}
		valid := false
		switch {
		case t.Token != "" && t.TokenSHA256 != "":
			p.add(f, "give token or token_sha256, not both")
		case t.TokenSHA256 != "":
			if b, err := hex.DecodeString(t.TokenSHA256); err != nil || len(b) != sha256.Size {
				p.add(f+".token_sha256", "must be %d hex digits (a SHA-256)", 2*sha256.Size)
			} else {
				valid = true
			}
		case len(t.Token) < MinTokenLength:
			p.add(f+".token", "must be at least %d characters (or give token_sha256)", MinTokenLength)
		default:
			valid = true
		}
		if sum := t.Sum(); valid && seen[sum] {
			p.add(f, "duplicates another token")
		} else if valid {
			seen[sum] = true
		}
		if t.Role != RoleViewer && t.Role != RoleOperator {
			p.add(f+".role", "must be viewer or operator, got %q", t.Role)
		}
	}
	return p.err()
}
