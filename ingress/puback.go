package ingress

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidwall/gjson"
)

// requestPubAck is jetstream's PublishMsg without its encoding/json: the
// same core request, the same retries while no stream answers (a leader
// election), the same errors. Decoding each PubAck by reflection was the
// largest piece of ingress's own CPU in profiles (BENCHMARKS.md).
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
			ack.Sequence, ok = uintOf(v, 64)
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
			c, ok = uintOf(v, 16)
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

// uintOf and intOf take only plain integers in range: strconv refuses a
// fraction or exponent (valid JSON numbers encoding/json refuses for an
// integer field) and, for uintOf, a sign.
func uintOf(v gjson.Result, bits int) (uint64, bool) {
	switch v.Type {
	case gjson.Null:
		return 0, true
	case gjson.Number:
		n, err := strconv.ParseUint(v.Raw, 10, bits)
		return n, err == nil
	}
	return 0, false
}

func intOf(v gjson.Result) (int, bool) {
	switch v.Type {
	case gjson.Null:
		return 0, true
	case gjson.Number:
		n, err := strconv.ParseInt(v.Raw, 10, strconv.IntSize)
		return int(n), err == nil
	}
	return 0, false
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
