// Package jsondiff compares two JSON payloads as an operator reads a
// conflict: by field, object keys in any order (a moved field is not a
// change), numbers as written. The console's conflict page and the API's
// conflict diff (intake conflicts show) use it.
package jsondiff

import (
	"bytes"
	"encoding/json"
	"io"
	"sort"
	"strconv"
)

// Canonical re-indents a JSON document with every object's keys in
// sorted order (numbers kept as written), so that two payloads that hold
// the same fields in another order diff as the same: a moved field is not
// a change. ok is false for a body that is not one JSON value.
func Canonical(b []byte) (v any, text string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, "", false
	}
	out, err := json.MarshalIndent(v, "", "  ") // maps marshal with sorted keys
	if err != nil {
		return nil, "", false
	}
	return v, string(out), true
}

// Change is one JSON path whose value differs between two payloads:
// Op is change, add (only on the right) or del (only on the left); Left and
// Right are the values as compact JSON.
type Change struct {
	Path  string `json:"path"`
	Op    string `json:"op"` // change, add, del
	Left  string `json:"left,omitempty"`
	Right string `json:"right,omitempty"`
}

// MaxChanges bounds the list of changed paths a conflict shows.
const MaxChanges = 200

// Changes compares two decoded JSON values structurally: objects by
// key (order ignored), arrays by position, everything else by value.
func Changes(a, b any, path string, out []Change) []Change {
	if len(out) >= MaxChanges {
		return out
	}
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			keys := make([]string, 0, len(av)+len(bv))
			for k := range av {
				keys = append(keys, k)
			}
			for k := range bv {
				if _, dup := av[k]; !dup {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				l, inA := av[k]
				r, inB := bv[k]
				p := path + "." + k
				switch {
				case !inB:
					out = append(out, Change{Path: p, Op: "del", Left: compact(l)})
				case !inA:
					out = append(out, Change{Path: p, Op: "add", Right: compact(r)})
				default:
					out = Changes(l, r, p, out)
				}
			}
			return out
		}
	case []any:
		if bv, ok := b.([]any); ok {
			for i := 0; i < max(len(av), len(bv)); i++ {
				p := path + "[" + strconv.Itoa(i) + "]"
				switch {
				case i >= len(bv):
					out = append(out, Change{Path: p, Op: "del", Left: compact(av[i])})
				case i >= len(av):
					out = append(out, Change{Path: p, Op: "add", Right: compact(bv[i])})
				default:
					out = Changes(av[i], bv[i], p, out)
				}
			}
			return out
		}
	}
	if l, r := compact(a), compact(b); l != r {
		out = append(out, Change{Path: path, Op: "change", Left: l, Right: r})
	}
	return out
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
