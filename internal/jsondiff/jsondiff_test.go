package jsondiff_test

import (
	"reflect"
	"testing"

	"github.com/intakehq/intake/internal/jsondiff"
)

// TestStructuralJSONDiff (issue 34 item 5): a field that moved is not a
// change; a changed, added or removed field is named by its path.
func TestStructuralJSONDiff(t *testing.T) {
	a := []byte(`{"id":"evt_1","amount":100,"customer":{"id":"cus_1","tags":["a","b"]},"currency":"eur"}`)
	moved := []byte(`{"currency":"eur","customer":{"tags":["a","b"],"id":"cus_1"},"amount":100,"id":"evt_1"}`)
	changed := []byte(`{"id":"evt_1","amount":250,"customer":{"id":"cus_1","tags":["a","b","c"]},"note":"x"}`)

	av, at, ok := jsondiff.Canonical(a)
	mv, mt, ok2 := jsondiff.Canonical(moved)
	if !ok || !ok2 {
		t.Fatal("valid JSON not read")
	}
	if at != mt {
		t.Errorf("the same fields in another order canonicalize differently:\n%s\n%s", at, mt)
	}
	if got := jsondiff.Changes(av, mv, "$", nil); len(got) != 0 {
		t.Errorf("moved fields reported as changes: %+v", got)
	}

	cv, _, _ := jsondiff.Canonical(changed)
	want := []jsondiff.Change{
		{Path: "$.amount", Op: "change", Left: "100", Right: "250"},
		{Path: "$.currency", Op: "del", Left: `"eur"`},
		{Path: "$.customer.tags[2]", Op: "add", Right: `"c"`},
		{Path: "$.note", Op: "add", Right: `"x"`},
	}
	if got := jsondiff.Changes(av, cv, "$", nil); !reflect.DeepEqual(got, want) {
		t.Errorf("changes = %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{`{"a":1} {"b":2}`, `{"a":`, `not json`, ``} {
		if _, _, ok := jsondiff.Canonical([]byte(bad)); ok {
			t.Errorf("%q read as one JSON value", bad)
		}
	}
	// Numbers are kept as written: no float rounding of large ids.
	_, big, _ := jsondiff.Canonical([]byte(`{"n":12345678901234567890}`))
	if big != "{\n  \"n\": 12345678901234567890\n}" {
		t.Errorf("large number changed: %s", big)
	}
}
