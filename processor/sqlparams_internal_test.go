package processor

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestBindNamed(t *testing.T) {
	tests := []struct {
		name, in, want string
		params         []string
	}{
		{"none", "select 1", "select 1", nil},
		{"one", "insert into p(k) values (:key)", "insert into p(k) values (($1::text))", []string{"key"}},
		{"reused", "select :key, :body, :key", "select ($1::text), ($2::jsonb), ($1::text)", []string{"key", "body"}},
		{"every type", ":raw :headers :object_version :received_at", "($1::bytea) ($2::jsonb) ($3::bigint) ($4::timestamptz)",
			[]string{"raw", "headers", "object_version", "received_at"}},
		{"cast", "select :body::text, x::jsonb", "select ($1::jsonb)::text, x::jsonb", []string{"body"}},
		{"cast of a name", "select 'a'::text", "select 'a'::text", nil},
		{"string", "select ':key', :key", "select ':key', ($1::text)", []string{"key"}},
		{"doubled quote", "select 'it''s :key'", "select 'it''s :key'", nil},
		{"escape string", `select E'\' :key', :mode`, `select E'\' :key', ($1::text)`, []string{"mode"}},
		{"not an escape string", `select 'a\', :mode`, `select 'a\', ($1::text)`, []string{"mode"}},
		{"quoted identifier", `select "a:key""b" from t`, `select "a:key""b" from t`, nil},
		{"line comment", "select 1 -- :key\n, :tenant", "select 1 -- :key\n, ($1::text)", []string{"tenant"}},
		{"line comment at end", "select 1 -- :key", "select 1 -- :key", nil},
		{"block comment", "select /* :key /* nested :x */ :y */ :tenant", "select /* :key /* nested :x */ :y */ ($1::text)", []string{"tenant"}},
		{"dollar quote", "do $$ begin x := :key; end $$", "do $$ begin x := :key; end $$", nil},
		{"tagged dollar quote", "select $f$ :key $$ $f$, :key", "select $f$ :key $$ $f$, ($1::text)", []string{"key"}},
		{"dollar in identifier", "select a$b, :key", "select a$b, ($1::text)", []string{"key"}},
		{"colon alone", "select a[1 : 2]", "select a[1 : 2]", nil},
		{"json operator", "select :body->>'id'", "select ($1::jsonb)->>'id'", []string{"body"}},
		{"utf8", "select 'é', :key", "select 'é', ($1::text)", []string{"key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, params, err := bindNamed(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("bindNamed(%q) = %q, want %q", tt.in, got, tt.want)
			}
			var names []string
			for _, p := range params {
				names = append(names, p.name)
			}
			if strings.Join(names, ",") != strings.Join(tt.params, ",") {
				t.Errorf("params %v, want %v", names, tt.params)
			}
		})
	}
}

func TestBindNamedRefuses(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"unknown", "select :bodyy", ":bodyy"},
		{"positional", "select $1", "positional"},
		{"string", "select 'a", "unterminated string"},
		{"escape string", `select E'a\'`, "unterminated string"},
		{"identifier", `select "a`, "unterminated quoted identifier"},
		{"comment", "select /* a /* b */", "unterminated comment"},
		{"dollar quote", "select $x$ a", "unterminated dollar-quoted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := bindNamed(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("bindNamed(%q) = %v, want an error saying %q", tt.in, err, tt.want)
			}
		})
	}
	if _, _, err := bindNamed("select :nope"); !errors.Is(err, ErrUnknownParameter) {
		t.Errorf("unknown parameter: %v, want ErrUnknownParameter", err)
	}
}

// FuzzBindNamed: the rewrite never panics, keeps every byte that is not a
// parameter, and numbers parameters 1..n.
func FuzzBindNamed(f *testing.F) {
	for _, s := range []string{"select :key", "select ':key' -- :x\n", "$a$ :b $a$ :body::text", `E'\'' "q""" /* /* */ */`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, params, err := bindNamed(in)
		if err != nil {
			return
		}
		if len(params) == 0 && got != in {
			t.Fatalf("no parameters, yet %q became %q", in, got)
		}
		for i := range params {
			if !strings.Contains(got, "($"+itoa(i+1)+"::") {
				t.Fatalf("%q: parameter %d missing in %q", in, i+1, got)
			}
		}
	})
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestHoldsNUL(t *testing.T) {
	for body, want := range map[string]bool{
		`{"a":"x"}`:               false,
		`{"a":"x\u0000y"}`:        true,
		`{"a\u0000":1}`:           true,
		`{"a":"\\u0000"}`:         false, // a backslash, then u0000
		`["ok", {"b": "\u0000"}]`: true,
	} {
		if got := holdsNUL([]byte(body)); got != want {
			t.Errorf("holdsNUL(%s) = %v, want %v", body, got, want)
		}
	}
}
