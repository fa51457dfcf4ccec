package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// docRow is one row of a README configuration table: a key (a dotted YAML
// path) and its documented default, as written.
type docRow struct{ key, value string }

var backticked = regexp.MustCompile("`([^`]*)`")

// readmeTables returns the rows of the configuration table under
// "## Configuration" and of the integration table after "Every integration:".
func readmeTables(t *testing.T) (top, integration []docRow) {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	_, section, ok := strings.Cut(text, "\n## Configuration\n")
	if !ok {
		t.Fatal("README.md has no ## Configuration section")
	}
	_, inTable, ok := strings.Cut(section, "\nEvery integration:\n")
	if !ok {
		t.Fatal("README.md's Configuration has no integration table")
	}
	return tableRows(t, section), tableRows(t, inTable)
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
			t.Fatalf("README row without a `key`: %s", line)
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
			t.Errorf("%s: %s defaults to %v in code, %s in README.md", where, r.key, got.Interface(), m[1])
		}
	}
}

// TestReadmeDefaults keeps README.md's configuration tables and the code's
// defaults the same: every documented default is what Config{} gets, and
// every key of the file is documented.
func TestReadmeDefaults(t *testing.T) {
	top, integration := readmeTables(t)
	cfg := Config{Integrations: []Integration{{}}}.WithDefaults()
	root := reflect.ValueOf(cfg)
	checkDocumented(t, top, root, root, "README configuration table")
	checkDocumented(t, integration, reflect.ValueOf(cfg.Integrations[0]), root, "README integration table")

	documented := map[string]bool{}
	for _, r := range top {
		documented[strings.TrimSuffix(r.key, "[]")] = true
	}
	for _, key := range leafKeys(reflect.TypeFor[Config](), "") {
		if !documented[key] {
			t.Errorf("%s is not in README.md's configuration table", key)
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
