package store

import (
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/intakehq/intake/internal/jsonstr"
)

// Outbox headers are stored as jsonb ({"Name": ["value", …]}) so operators
// and the replayer can query them. Encoding and decoding them with
// encoding/json's reflection was a large share of the processor's CPU in
// `intake bench` profiles; these two functions do the one shape by hand.

// appendHeadersJSON appends h as a JSON object of string arrays.
func appendHeadersJSON(dst []byte, h map[string][]string) []byte {
	dst = append(dst, '{')
	first := true
	for k, vs := range h {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = jsonstr.Append(dst, k)
		dst = append(dst, ':', '[')
		for i, v := range vs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonstr.Append(dst, v)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// parseHeadersJSON reads what appendHeadersJSON wrote (as jsonb renders it).
func parseHeadersJSON(raw []byte) (map[string][]string, error) {
	if !gjson.ValidBytes(raw) {
		return nil, fmt.Errorf("store: outbox headers are not JSON")
	}
	root := gjson.ParseBytes(raw)
	if !root.IsObject() {
		return nil, fmt.Errorf("store: outbox headers are not a JSON object")
	}
	h := make(map[string][]string, 12)
	var err error
	root.ForEach(func(k, v gjson.Result) bool {
		if !v.IsArray() {
			err = fmt.Errorf("store: outbox header %s is not an array", strconv.Quote(k.String()))
			return false
		}
		vals := make([]string, 0, 1)
		v.ForEach(func(_, s gjson.Result) bool {
			vals = append(vals, s.String())
			return true
		})
		h[k.String()] = vals
		return true
	})
	return h, err
}
