package config

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Handler is one SQL handler: a statement the processor runs inside the
// batch's inbox transaction for the events it matches (see
// processor.SQLHandler). Handlers are tried in the order the file lists
// them; the first that matches an event runs, and an event none matches is
// forwarded (processor.Forward).
type Handler struct {
	// Name identifies the handler in errors, logs and metrics. Required,
	// unique, [A-Za-z0-9_-]{1,64}.
	Name string `yaml:"name"`
	// Integrations the handler applies to. Empty (the default): every
	// integration. Each must be an integration the file lists.
	Integrations []string `yaml:"integrations"`
	// Types are path.Match patterns against the event type ("invoice.*").
	// Empty (the default): every type, as ["*"].
	Types []string `yaml:"types"`
	// SQL is the statement, with named parameters (:key, :body, …).
	// Required.
	SQL string `yaml:"sql"`
	// Role, when set, is the Postgres role the statement runs as (SET LOCAL
	// ROLE): it must exist and hold no privilege on the intake schema.
	// Defaults to none: the processor's own role.
	Role string `yaml:"role"`
	// Forward also forwards the event to INTAKE_OUT as processor.Forward
	// does, after the statement's own messages. Defaults to false.
	Forward bool `yaml:"forward"`
}

// MaxHandlerRoleLength is the longest handlers[].role accepted: Postgres
// truncates identifiers past 63 bytes, so a longer one names another role.
const MaxHandlerRoleLength = 63

// Validate checks one handler; field is its place in the file (such as
// "handlers[0] (invoices)"), which every error starts with. integrations is
// the set of integration names the file lists.
func (h Handler) Validate(field string, integrations map[string]bool) error {
	var p problems
	if !nameRE.MatchString(h.Name) {
		p.add(field+".name", "required, 1-64 of [A-Za-z0-9_-], got %q", h.Name)
	}
	if strings.TrimSpace(h.SQL) == "" {
		p.add(field+".sql", "required: the statement the handler runs")
	}
	seen := map[string]bool{}
	for i, in := range h.Integrations {
		f := fmt.Sprintf("%s.integrations[%d]", field, i)
		switch {
		case !integrations[in]:
			p.add(f, "no integration is named %q", in)
		case seen[in]:
			p.add(f, "%q is listed twice", in)
		}
		seen[in] = true
	}
	for i, pat := range h.Types {
		f := fmt.Sprintf("%s.types[%d]", field, i)
		if pat == "" {
			p.add(f, "must not be empty (omit types for every type)")
		} else if _, err := path.Match(pat, ""); err != nil {
			p.add(f, "%q is not a path.Match pattern: %v", pat, err)
		}
	}
	if h.Role != "" && (len(h.Role) > MaxHandlerRoleLength || strings.ContainsRune(h.Role, 0)) {
		p.add(field+".role", "must be a Postgres role name of at most %d bytes", MaxHandlerRoleLength)
	}
	return p.err()
}

// validateHandlers checks each handler and that names are unique.
func validateHandlers(list []Handler, integrations []Integration) error {
	known := map[string]bool{}
	for _, in := range integrations {
		known[in.Name] = true
	}
	var p problems
	seen := map[string]bool{}
	for i, h := range list {
		f := fmt.Sprintf("handlers[%d]", i)
		if h.Name != "" {
			f = fmt.Sprintf("handlers[%d] (%s)", i, h.Name)
		}
		p.also(h.Validate(f, known))
		if h.Name != "" && seen[h.Name] {
			p.add(f+".name", "duplicate handler name")
		}
		seen[h.Name] = true
	}
	return p.err()
}

// handlerKeys are the keys a handlers[] entry may have: the contract.
var handlerKeys = []string{"name", "integrations", "types", "sql", "role", "forward"}

// checkHandlerKeys refuses an unknown key in a handlers[] entry naming the
// handler, before the decoder's own error (which names only a line) can.
func checkHandlerKeys(doc *yaml.Node) error {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return nil
	}
	var p problems
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value != "handlers" || doc.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		for j, h := range doc.Content[i+1].Content {
			if h.Kind != yaml.MappingNode {
				p.add(fmt.Sprintf("handlers[%d]", j), "line %d: must be a mapping of %s", h.Line, strings.Join(handlerKeys, ", "))
				continue
			}
			f := fmt.Sprintf("handlers[%d]", j)
			for k := 0; k+1 < len(h.Content); k += 2 {
				if h.Content[k].Value == "name" && h.Content[k+1].Kind == yaml.ScalarNode && h.Content[k+1].Value != "" {
					f = fmt.Sprintf("handlers[%d] (%s)", j, h.Content[k+1].Value)
				}
			}
			for k := 0; k+1 < len(h.Content); k += 2 {
				if key := h.Content[k].Value; !slices.Contains(handlerKeys, key) {
					p.add(f, "line %d: unknown key %q (a handler has %s)", h.Content[k].Line, key, strings.Join(handlerKeys, ", "))
				}
			}
		}
	}
	return p.err()
}
