package store

import (
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/intakehq/intake/internal/jsonstr"
	"github.com/intakehq/intake/pkg/envelope"
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
		dst = appendHeaderJSON(dst, k, vs)
	}
	return append(dst, '}')
}

// appendHeaderJSON appends one header as a JSON member: "k":["v",…].
func appendHeaderJSON(dst []byte, k string, vs []string) []byte {
	dst = jsonstr.Append(dst, k)
	dst = append(dst, ':', '[')
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonstr.Append(dst, v)
	}
	return append(dst, ']')
}

// An outbox row does not store the headers it gives back by itself: the
// event's key, integration, account and id, which its columns hold, and,
// for a row whose payload is INTAKE_IN's (PayloadSeq), the
// Intake-Payload-Sha256 that message carries (stream.InPayload checks the
// body against it). They were most of a built-in forward's header bytes:
// its row is 457 table bytes from 820, and its COPY costs Postgres 6–8 µs
// less (BENCHMARKS.md, "An outbox row without what it gives back").
// Reading a row puts them back — ClaimOutbox and GetOutboxRow the key's
// four, OutboxRow.SetStreamPayload the hash — also to a row written
// without them. A value that differs from the row's own (a handler's
// header) is stored as it is.

// appendOutboxHeadersJSON appends r's headers as appendHeadersJSON does,
// leaving out those the row gives back (rowGives).
func appendOutboxHeadersJSON(dst []byte, r *OutboxRow) []byte {
	dst = append(dst, '{')
	first := true
	for k, vs := range r.Headers {
		if r.rowGives(k, vs) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendHeaderJSON(dst, k, vs)
	}
	return append(dst, '}')
}

// rowGives reports whether header k with values vs is one the row gives
// back when read, so that it need not be stored.
func (r *OutboxRow) rowGives(k string, vs []string) bool {
	if len(vs) != 1 {
		return false
	}
	v := vs[0]
	switch k {
	case envelope.HeaderKey:
		i, a, e := r.Key.Integration, r.Key.Account, r.Key.EventID
		return len(v) == len(i)+len(a)+len(e)+2 && v[:len(i)] == i && v[len(i)] == '/' &&
			v[len(i)+1:len(i)+1+len(a)] == a && v[len(i)+1+len(a)] == '/' && v[len(i)+len(a)+2:] == e
	case envelope.HeaderIntegration:
		return v == r.Key.Integration
	case envelope.HeaderAccount:
		return v == r.Key.Account
	case envelope.HeaderEventID:
		return v == r.Key.EventID
	case envelope.HeaderPayloadSHA256:
		return r.PayloadSeq != 0 // the stream message's (OutboxRow.PayloadSeq)
	}
	return false
}

// restoreKeyHeaders puts back the key's headers a row read from the table
// does not store (rows written before they were left out store them).
func (r *OutboxRow) restoreKeyHeaders() {
	if r.Headers == nil {
		r.Headers = make(map[string][]string, 12)
	}
	put := func(k, v string) {
		if _, ok := r.Headers[k]; !ok {
			r.Headers[k] = []string{v}
		}
	}
	put(envelope.HeaderKey, r.Key.String())
	put(envelope.HeaderIntegration, r.Key.Integration)
	put(envelope.HeaderAccount, r.Key.Account)
	put(envelope.HeaderEventID, r.Key.EventID)
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
