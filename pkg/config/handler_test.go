package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const handlerBase = `
integrations:
  - {name: stripe-demo, provider: stripe, tenant: acme, secrets: [whsec_x]}
  - {name: github-demo, provider: github, tenant: acme, secrets: [x]}
`

func TestHandlersParse(t *testing.T) {
	cfg, err := Parse([]byte(handlerBase+`
handlers:
  - name: invoices
    integrations: [stripe-demo]
    types: ["invoice.*"]
    sql: "select * from billing.apply_invoice(:body, :key, :execution_id, :mode)"
    role: billing_writer
    forward: true
  - name: everything
    sql: "insert into audit(key) values (:key)"
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Handlers) != 2 {
		t.Fatalf("handlers = %+v", cfg.Handlers)
	}
	h := cfg.Handlers[0]
	if h.Name != "invoices" || h.Integrations[0] != "stripe-demo" || h.Types[0] != "invoice.*" || h.Role != "billing_writer" || !h.Forward {
		t.Errorf("handlers[0] = %+v", h)
	}
	if e := cfg.Handlers[1]; e.Forward || e.Role != "" || e.Types != nil || e.Integrations != nil {
		t.Errorf("handlers[1] defaults = %+v", e)
	}
}

// TestHandlerErrorsNameTheHandler: every refusal names the entry and the key.
func TestHandlerErrorsNameTheHandler(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", `[{name: inv, sql: "select 1", rol: x}]`, []string{"handlers[0] (inv)", `unknown key "rol"`}},
		{"unknown key, no name", `[{sql: "select 1", typess: [a]}]`, []string{"handlers[0]", `unknown key "typess"`}},
		{"empty sql", `[{name: inv, sql: "  "}]`, []string{"handlers[0] (inv).sql", "required"}},
		{"no name", `[{sql: "select 1"}]`, []string{"handlers[0].name", "required"}},
		{"bad name", `[{name: "a b", sql: "select 1"}]`, []string{"handlers[0] (a b).name"}},
		{"duplicate", `[{name: a, sql: "select 1"}, {name: a, sql: "select 2"}]`, []string{"handlers[1] (a).name: duplicate handler name"}},
		{"bad pattern", `[{name: inv, sql: "select 1", types: ["invoice.["]}]`, []string{"handlers[0] (inv).types[0]", "path.Match"}},
		{"empty pattern", `[{name: inv, sql: "select 1", types: [""]}]`, []string{"handlers[0] (inv).types[0]", "must not be empty"}},
		{"unknown integration", `[{name: inv, sql: "select 1", integrations: [stripe-dem]}]`, []string{"handlers[0] (inv).integrations[0]", `"stripe-dem"`}},
		{"integration twice", `[{name: inv, sql: "select 1", integrations: [stripe-demo, stripe-demo]}]`, []string{"handlers[0] (inv).integrations[1]", "twice"}},
		{"long role", `[{name: inv, sql: "select 1", role: ` + strings.Repeat("r", 64) + `}]`, []string{"handlers[0] (inv).role", "63"}},
		{"not a mapping", `["select 1"]`, []string{"handlers[0]", "must be a mapping"}},
		{"forward not a bool", `[{name: inv, sql: "select 1", forward: yes please}]`, []string{"bool"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(handlerBase+"handlers: "+tt.yaml+"\n"), env(nil))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestHandlerKeysAreDocumented: docs/configuration.md's ## Handlers table
// lists exactly the keys a handler has, with its defaults, and the keys the
// unknown-key check knows are the struct's.
func TestHandlerKeysAreDocumented(t *testing.T) {
	doc, _, _ := configTables(t)
	raw, err := os.ReadFile(filepath.Join("../..", filepath.FromSlash(doc)))
	if err != nil {
		t.Fatal(err)
	}
	text, ok := section(string(raw), "## Handlers")
	if !ok {
		t.Fatalf("%s has no ## Handlers section", doc)
	}
	rows := tableRows(t, text)
	cfg := Config{Handlers: []Handler{{}}}.WithDefaults()
	checkDocumented(t, rows, reflect.ValueOf(cfg.Handlers[0]), reflect.ValueOf(cfg), doc+" ## Handlers")
	var documented []string
	for _, r := range rows {
		documented = append(documented, r.key)
	}
	if keys := leafKeys(reflect.TypeFor[Handler](), ""); !slices.Equal(keys, documented) || !slices.Equal(keys, handlerKeys) {
		t.Errorf("Handler's keys %v; documented %v; checked for unknown keys %v", keys, documented, handlerKeys)
	}
}
