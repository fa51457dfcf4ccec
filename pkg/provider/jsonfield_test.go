package provider

import (
	"errors"
	"testing"
)

func TestJSONField(t *testing.T) {
	tests := []struct {
		name, body, path, want string
		wantErr                error
	}{
		{name: "string", body: `{"id":"evt_1"}`, path: "id", want: "evt_1"},
		{name: "nested", body: `{"data":{"object":{"id":"ch_1"}}}`, path: "data.object.id", want: "ch_1"},
		{name: "integer as raw text", body: `{"id":123}`, path: "id", want: "123"},
		{name: "large integer keeps every digit", body: `{"id":12345678901234567890}`, path: "id", want: "12345678901234567890"},
		{name: "float as raw text", body: `{"id":1.5e3}`, path: "id", want: "1.5e3"},
		{name: "escaped string", body: `{"id":"caf\u00e9 \"x\""}`, path: "id", want: `café "x"`},
		{name: "array index", body: `{"items":[{"id":"a"},{"id":"b"}]}`, path: "items.1.id", want: "b"},
		{name: "escaped dot in key", body: `{"a.b":"x","a":{"b":"y"}}`, path: `a\.b`, want: "x"},
		// Issue 14: gjson reads the first copy, encoding/json the last.
		{name: "duplicate keys", body: `{"id":"first","id":"second"}`, path: "id", wantErr: ErrMalformed},
		{name: "duplicate keys in another case", body: `{"id":"first","ID":"second"}`, path: "id", wantErr: ErrMalformed},
		{name: "duplicate parent", body: `{"data":{"id":"a"},"data":{"id":"b"}}`, path: "data.id", wantErr: ErrMalformed},
		{name: "duplicate key off the path", body: `{"id":"a","x":1,"x":2}`, path: "id", want: "a"},
		{name: "duplicates inside an array element", body: `{"items":[{"id":"a","id":"b"}]}`, path: "items.0.id", wantErr: ErrMalformed},
		{name: "missing", body: `{"id":"x"}`, path: "nope", want: ""},
		{name: "null", body: `{"id":null}`, path: "id", want: ""},
		{name: "object", body: `{"id":{"x":1}}`, path: "id", want: ""},
		{name: "array", body: `{"id":[1]}`, path: "id", want: ""},
		{name: "bool", body: `{"id":true}`, path: "id", want: ""},
		{name: "top-level array", body: `["x"]`, path: "id", want: ""},
		{name: "whitespace around", body: " \n{ \"id\" : \"x\" }\n", path: "id", want: "x"},
		{name: "truncated", body: `{"id":"x"`, path: "id", wantErr: ErrMalformed},
		{name: "trailing garbage", body: `{"id":"x"} y`, path: "id", wantErr: ErrMalformed},
		{name: "not JSON", body: `id=x`, path: "id", wantErr: ErrMalformed},
		{name: "empty", body: ``, path: "id", wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := validatePath(tt.path); err != nil {
				t.Fatalf("validatePath(%q): %v", tt.path, err)
			}
			got, err := jsonField([]byte(tt.body), tt.path)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("jsonField: %v", err)
			}
			if got != tt.want {
				t.Fatalf("jsonField = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidatePath(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
	}{
		{"id", true},
		{"data.object.id", true},
		{"items.0.id", true},
		{`a\.b.c`, true},
		{`a\*`, true},
		{`\@type`, true},
		{"", false},
		{".id", false},
		{"id.", false},
		{"a..b", false},
		{"..id", false},
		{`id\`, false},
		{"data.*", false},
		{"i?", false},
		{"items.#", false},
		{"items.#(id==1)", false},
		{"@reverse", false},
		{"data.@this", false},
		{"a|b", false},
		{`!"lit"`, false},
		{"[a,b]", false},
		{"{a}", false},
	}
	for _, tt := range tests {
		err := validatePath(tt.path)
		if (err == nil) != tt.ok {
			t.Errorf("validatePath(%q) = %v, want ok=%v", tt.path, err, tt.ok)
		}
	}
}

func TestJSONBodyValidatesOnce(t *testing.T) {
	b := jsonBody{raw: []byte(`{"id":"x","type":"t"}`)}
	for _, p := range []string{"id", "type", "id"} {
		if _, err := b.field(p); err != nil {
			t.Fatal(err)
		}
	}
	if !b.checked {
		t.Fatal("body not marked checked")
	}
	bad := jsonBody{raw: []byte(`{`)}
	_, err1 := bad.field("id")
	_, err2 := bad.field("type")
	if !errors.Is(err1, ErrMalformed) || err1 != err2 {
		t.Fatalf("errors = %v, %v; want the same ErrMalformed twice", err1, err2)
	}
}

// Fields are read from the body without copying it (view), and what is
// returned is copied: a caller that reuses the body's buffer afterwards
// does not change an id or type already read.
func TestReadValuesOutliveTheBody(t *testing.T) {
	body := []byte(`{"type":"invoice.paid","data":{"id":"in_1"}}`)
	typ, err := jsonField(body, "type")
	if err != nil || typ != "invoice.paid" {
		t.Fatalf("type = %q, %v", typ, err)
	}
	s, err := NewSplitter(Config{Provider: "hmac", Split: SplitConfig{ID: "id", Type: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	batch := []byte(`[{"id":"evt_a","t":"one"},{"id":"evt_b","t":"two"}]`)
	items, err := s.Split(batch, Identity{}, nil)
	if err != nil || len(items) != 2 {
		t.Fatalf("split: %v, %v", items, err)
	}
	for i := range body {
		body[i] = 'X'
	}
	for i := range batch {
		batch[i] = 'X'
	}
	if typ != "invoice.paid" {
		t.Errorf("the type read changed with the body: %q", typ)
	}
	if items[0].ID != "evt_a" || items[0].Type != "one" || items[1].ID != "evt_b" || items[1].Type != "two" {
		t.Errorf("the items' ids and types changed with the body: %+v", items)
	}
}
