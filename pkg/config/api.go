package config

import "fmt"

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

// MinTokenLength is the shortest bearer token api.tokens accepts.
const MinTokenLength = 16

// Validate checks the section; errors name the YAML field. The API has no
// defaults.
func (a API) Validate() error {
	var p problems
	seen := map[string]bool{}
	for i, t := range a.Tokens {
		f := fmt.Sprintf("api.tokens[%d]", i)
		if t.Name == "" {
			p.add(f+".name", "required")
		}
		if len(t.Token) < MinTokenLength {
			p.add(f+".token", "must be at least %d characters", MinTokenLength)
		}
		if seen[t.Token] && t.Token != "" {
			p.add(f+".token", "duplicates another token")
		}
		seen[t.Token] = true
		if t.Role != RoleViewer && t.Role != RoleOperator {
			p.add(f+".role", "must be viewer or operator, got %q", t.Role)
		}
	}
	return p.err()
}
