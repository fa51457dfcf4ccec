package ingress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidwall/gjson"
)

// requestPubAck is jetstream's PublishMsg without its encoding/json: the
// same core request, the same retries while no stream answers (a leader
// election), the same errors. Decoding each PubAck by reflection was the
// largest piece of ingress's own CPU (7 % at 1 KiB bodies; BENCHMARKS.md).
func requestPubAck(ctx context.Context, nc *nats.Conn, m *nats.Msg) (*jetstream.PubAck, error) {
	resp, err := nc.RequestMsgWithContext(ctx, m)
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < jetstream.DefaultPubRetryAttempts; r++ {
		select {
		case <-ctx.Done():
		case <-time.After(jetstream.DefaultPubRetryWait):
		}
		resp, err = nc.RequestMsgWithContext(ctx, m)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, jetstream.ErrNoStreamResponse
	}
	if err != nil {
		return nil, err
	}
	return parsePubAck(resp.Data)
}

// parsePubAck reads a JetStream publish response in one pass: a PubAck, or
// the API error it carries as a *jetstream.APIError (wrapped as jetstream
// wraps it). Anything else, or a field of the wrong type, is
// jetstream.ErrInvalidJSAck. Like encoding/json, a repeated key's last
// value counts.
func parsePubAck(data []byte) (*jetstream.PubAck, error) {
	if !gjson.ValidBytes(data) {
		return nil, jetstream.ErrInvalidJSAck
	}
	root := gjson.ParseBytes(data)
	if !root.IsObject() {
		return nil, jetstream.ErrInvalidJSAck
	}
	var ack jetstream.PubAck
	var apiErr *jetstream.APIError
	ok := true
	root.ForEach(func(k, v gjson.Result) bool {
		switch {
		case is(k, "stream"):
			ack.Stream, ok = str(v)
		case is(k, "seq"):
			ack.Sequence, ok = uintOf(v, 1<<64-1)
		case is(k, "duplicate"):
			ack.Duplicate, ok = boolOf(v)
		case is(k, "domain"):
			ack.Domain, ok = str(v)
		case is(k, "val"):
			ack.Value, ok = str(v)
		case is(k, "error"):
			apiErr, ok = parseAPIError(v)
		case is(k, "type"): // not used, but jetstream refuses a non-string
			_, ok = str(v)
		}
		return ok
	})
	switch {
	case !ok:
		return nil, jetstream.ErrInvalidJSAck
	case apiErr != nil:
		return nil, fmt.Errorf("nats: %w", apiErr)
	case ack.Stream == "":
		return nil, jetstream.ErrInvalidJSAck
	}
	return &ack, nil
}

func parseAPIError(v gjson.Result) (*jetstream.APIError, bool) {
	if v.Type == gjson.Null {
		return nil, true
	}
	if !v.IsObject() {
		return nil, false
	}
	e := &jetstream.APIError{}
	ok := true
	v.ForEach(func(k, v gjson.Result) bool {
		switch {
		case is(k, "code"):
			e.Code, ok = intOf(v)
		case is(k, "err_code"):
			var c uint64
			c, ok = uintOf(v, 1<<16-1)
			e.ErrorCode = jetstream.ErrorCode(c)
		case is(k, "description"):
			e.Description, ok = str(v)
		}
		return ok
	})
	return e, ok
}

// is matches a key to a field name as encoding/json does: exactly, or
// else case-insensitively.
func is(k gjson.Result, name string) bool {
	return k.Str == name || strings.EqualFold(k.Str, name)
}

// str, uintOf, intOf and boolOf take a value of the type encoding/json would
// accept, null (which leaves the zero value) included.
func str(v gjson.Result) (string, bool) {
	switch v.Type {
	case gjson.Null:
		return "", true
	case gjson.String:
		return v.Str, true
	}
	return "", false
}

func uintOf(v gjson.Result, limit uint64) (uint64, bool) {
	switch v.Type {
	case gjson.Null:
		return 0, true
	case gjson.Number:
		// Only plain non-negative integers: no sign, fraction or exponent.
		for i := 0; i < len(v.Raw); i++ {
			if v.Raw[i] < '0' || v.Raw[i] > '9' {
				return 0, false
			}
		}
		n, ok := parseUint(v.Raw)
		return n, ok && n <= limit
	}
	return 0, false
}

func intOf(v gjson.Result) (int, bool) {
	if v.Type == gjson.Number && strings.HasPrefix(v.Raw, "-") {
		n, ok := uintOf(gjson.Result{Type: gjson.Number, Raw: v.Raw[1:]}, 1<<63)
		return int(-n), ok
	}
	n, ok := uintOf(v, 1<<63-1)
	return int(n), ok
}

func parseUint(s string) (uint64, bool) {
	var n uint64
	for i := 0; i < len(s); i++ {
		d := uint64(s[i] - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, len(s) > 0
}

func boolOf(v gjson.Result) (bool, bool) {
	switch v.Type {
	case gjson.Null, gjson.False:
		return false, true
	case gjson.True:
		return true, true
	}
	return false, false
}
