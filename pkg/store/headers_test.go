package store

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

func TestHeadersJSONRoundTrip(t *testing.T) {
	h := map[string][]string{
		"Intake-Key":        {"demo/main/evt_1"},
		"Intake-Event-Type": {"invoice.paid"},
		"Weird":             {"quote \" backslash \\ nl \n tab \t ctl \x01 ü 🎉", ""},
		"Empty":             {},
	}
	raw := appendHeadersJSON(nil, h)
	var viaStd map[string][]string
	if err := json.Unmarshal(raw, &viaStd); err != nil {
		t.Fatalf("encoding/json cannot read %s: %v", raw, err)
	}
	got, err := parseHeadersJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for k, v := range h {
		want[k] = append([]string{}, v...)
	}
	if !reflect.DeepEqual(viaStd, want) || !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n std %q\n ours %q\n want %q", viaStd, got, want)
	}
	if _, err := parseHeadersJSON([]byte(`{"a":"not an array"}`)); err == nil {
		t.Fatal("a non-array header value was accepted")
	}
}

func FuzzHeadersJSON(f *testing.F) {
	f.Add("Intake-Key", "demo/main/evt_1")
	f.Add("k\x00", "\xff\"\\")
	f.Fuzz(func(t *testing.T, k, v string) {
		raw := appendHeadersJSON(nil, map[string][]string{k: {v, v}})
		var viaStd map[string][]string
		if err := json.Unmarshal(raw, &viaStd); err != nil {
			t.Fatalf("encoding/json rejects %q: %v", raw, err)
		}
		got, err := parseHeadersJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, viaStd) {
			t.Fatalf("ours %q, encoding/json %q", got, viaStd)
		}
		if utf8.ValidString(k) && utf8.ValidString(v) {
			if vs := got[k]; len(vs) != 2 || vs[0] != v {
				t.Fatalf("lost %q=%q: %q", k, v, got)
			}
		}
	})
}
