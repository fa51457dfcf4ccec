package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// docRow is one row of a configuration table: a key (a dotted YAML path)
// and its documented default, as written.
type docRow struct{ key, value string }

var (
	backticked = regexp.MustCompile("`([^`]*)`")
	// docLink is a Markdown link to a file under docs/ (an anchor allowed).
	docLink = regexp.MustCompile(`\]\((docs/[^)#\s]+\.md)(?:#[^)\s]*)?\)`)
)

// section returns what follows the heading line in text, up to the next
// heading of the same level, or false.
func section(text, heading string) (string, bool) {
	_, rest, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok {
		return "", false
	}
	if end := strings.Index(rest, "\n"+heading[:strings.Index(heading, " ")+1]); end >= 0 {
		rest = rest[:end+1]
	}
	return rest, true
}

// configTables follows README.md's "## Configuration" section to the
// reference it links (docs/configuration.md) and returns the rows of its
// table under "## Keys" and of the integration table under
// "## Integrations". The README keeps a summary; the tables live in docs/.
func configTables(t *testing.T) (doc string, top, integration []docRow) {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, ok := section(string(raw), "## Configuration")
	if !ok {
		t.Fatal("README.md has no ## Configuration section")
	}
	m := docLink.FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README.md's ## Configuration links no docs/*.md reference")
	}
	doc = m[1]
	if raw, err = os.ReadFile(filepath.Join("../..", filepath.FromSlash(doc))); err != nil {
		t.Fatalf("README.md's ## Configuration links %s: %v", doc, err)
	}
	keys, ok := section(string(raw), "## Keys")
	if !ok {
		t.Fatalf("%s has no ## Keys section", doc)
	}
	integrations, ok := section(string(raw), "## Integrations")
	if !ok {
		t.Fatalf("%s has no ## Integrations section", doc)
	}
	top, integration = tableRows(t, keys), tableRows(t, integrations)
	if len(top) == 0 || len(integration) == 0 {
		t.Fatalf("%s: %d rows under ## Keys, %d under ## Integrations; want tables in both", doc, len(top), len(integration))
	}
	return doc, top, integration
}

// tableRows parses the first Markdown table in text. A key cell may list
// siblings ("`ingress.read_timeout` / `write_timeout`") with as many values.
func tableRows(t *testing.T, text string) []docRow {
	t.Helper()
	var rows []docRow
	started := false
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|")
		if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "key" {
			continue
		}
		keys := backticked.FindAllStringSubmatch(cells[1], -1)
		values := strings.Split(strings.TrimSpace(cells[2]), " / ")
		if len(keys) == 0 {
			t.Fatalf("configuration table row without a `key`: %s", line)
		}
		if len(values) != len(keys) {
			values = []string{strings.TrimSpace(cells[2])}
		}
		parent := ""
		for i, k := range keys {
			key := k[1]
			if i == 0 {
				if j := strings.LastIndex(key, "."); j >= 0 {
					parent = key[:j+1]
				}
			} else if !strings.Contains(key, ".") {
				key = parent + key
			}
			v := values[min(i, len(values)-1)]
			rows = append(rows, docRow{key: key, value: v})
		}
	}
	return rows
}

// field finds the value at a dotted YAML path in v (a struct), descending
// into inline fields.
func field(v reflect.Value, path string) (reflect.Value, bool) {
	head, rest, more := strings.Cut(path, ".")
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			if got, ok := field(v.Field(i), path); ok {
				return got, true
			}
			continue
		}
		if name != head {
			continue
		}
		if !more {
			return v.Field(i), true
		}
		return field(v.Field(i), rest)
	}
	return reflect.Value{}, false
}

// checkDocumented compares each documented default with the defaulted
// config: a backticked value is YAML for the field's type, or the key of
// another field ("`ingress.max_body_bytes`") whose value it takes.
func checkDocumented(t *testing.T, rows []docRow, in, root reflect.Value, where string) {
	t.Helper()
	for _, r := range rows {
		if strings.HasSuffix(r.key, "[]") {
			continue // lists of entries documented elsewhere
		}
		got, ok := field(in, r.key)
		if !ok {
			t.Errorf("%s documents %q, which Config does not have", where, r.key)
			continue
		}
		m := backticked.FindStringSubmatch(r.value)
		if m == nil {
			switch {
			case r.key == "ingress.instance" && r.value == "hostname":
				host, _ := os.Hostname()
				if got.String() != host {
					t.Errorf("%s: ingress.instance defaults to %q, not the hostname %q", where, got.String(), host)
				}
			case r.value == "required" || r.value == "per provider" || r.value == "":
			default:
				t.Errorf("%s: %s: default %q is neither `value` nor a known word", where, r.key, r.value)
			}
			continue
		}
		if ref, ok := field(root, m[1]); ok && strings.Contains(m[1], ".") {
			if !reflect.DeepEqual(got.Interface(), ref.Interface()) {
				t.Errorf("%s: %s = %v, documented as %s (%v)", where, r.key, got.Interface(), m[1], ref.Interface())
			}
			continue
		}
		want := reflect.New(got.Type())
		if err := yaml.Unmarshal([]byte(m[1]), want.Interface()); err != nil {
			t.Errorf("%s: %s: documented default %q does not parse as %s: %v", where, r.key, m[1], got.Type(), err)
			continue
		}
		if !reflect.DeepEqual(got.Interface(), want.Elem().Interface()) {
			t.Errorf("%s: %s defaults to %v in code, %s in the docs", where, r.key, got.Interface(), m[1])
		}
	}
}

// TestReadmeDefaults keeps the configuration reference the README links
// (docs/configuration.md) and the code's defaults the same: every
// documented default is what Config{} gets, and every key of the file is
// documented.
func TestReadmeDefaults(t *testing.T) {
	doc, top, integration := configTables(t)
	cfg := Config{Integrations: []Integration{{}}}.WithDefaults()
	root := reflect.ValueOf(cfg)
	checkDocumented(t, top, root, root, doc+" ## Keys")
	checkDocumented(t, integration, reflect.ValueOf(cfg.Integrations[0]), root, doc+" ## Integrations")

	documented := map[string]bool{}
	for _, r := range top {
		documented[strings.TrimSuffix(r.key, "[]")] = true
	}
	for _, key := range leafKeys(reflect.TypeFor[Config](), "") {
		if !documented[key] {
			t.Errorf("%s is not in %s's ## Keys table", key, doc)
		}
	}
}

// leafKeys lists the dotted YAML keys of t's scalar fields; a list of
// entries (api.tokens, integrations) counts as one key.
func leafKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
			keys = append(keys, leafKeys(f.Type, prefix+name+".")...)
			continue
		}
		keys = append(keys, prefix+name)
	}
	return keys
}
