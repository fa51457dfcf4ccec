package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
)

// decodeLikeJetStream is what jetstream's PublishMsg does with a response:
// the reference parsePubAck must agree with.
func decodeLikeJetStream(data []byte) (*jetstream.PubAck, error) {
	var resp struct {
		Type  string              `json:"type"`
		Error *jetstream.APIError `json:"error"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, jetstream.ErrInvalidJSAck
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	if resp.PubAck == nil || resp.PubAck.Stream == "" {
		return nil, jetstream.ErrInvalidJSAck
	}
	return resp.PubAck, nil
}

var pubAckSeeds = []string{
	`{"stream":"INTAKE_IN","seq":42}`,
	`{"stream":"INTAKE_IN","seq":42,"duplicate":true}`,
	`{"stream":"INTAKE_IN","domain":"hub","seq":18446744073709551615,"val":"x"}`,
	`{"error":{"code":503,"err_code":10077,"description":"stream store failed"},"stream":"","seq":0}`,
	`{"error":{"code":409,"err_code":10158,"description":"duplicate message id is in process"}}`,
	`{"type":"io.nats.jetstream.api.v1.pub_ack","stream":"S","seq":1}`,
	`{"stream":"S","seq":1,"type":5}`,
	`{"stream":"S","seq":1,"seq":2,"error":null}`,
	`{"STREAM":"S","Seq":3,"Duplicate":false}`,
	`{"stream":"S","seq":-1}`,
	`{"stream":"S","seq":1.5}`,
	`{"stream":"S","seq":1e3}`,
	`{"stream":"S","seq":18446744073709551616}`,
	`{"stream":7,"seq":1}`,
	`{"stream":"S","duplicate":"yes"}`,
	`{"error":{"code":-1,"err_code":65536}}`,
	`{"error":[]}`,
	`{"stream":"S\u00e9","seq":1}`,
	`[]`, `null`, ``, `{`, `{"stream":"S",}`,
}

func TestParsePubAck(t *testing.T) {
	for _, in := range pubAckSeeds {
		t.Run(in, func(t *testing.T) { samePubAck(t, []byte(in)) })
	}
	ack, err := parsePubAck([]byte(`{"stream":"INTAKE_IN","seq":42,"duplicate":true}`))
	if err != nil || ack.Stream != "INTAKE_IN" || ack.Sequence != 42 || !ack.Duplicate {
		t.Fatalf("ack = %+v, %v", ack, err)
	}
	_, err = parsePubAck([]byte(`{"error":{"code":409,"err_code":10158,"description":"in process"}}`))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeDuplicateInProcess || apiErr.Code != 409 {
		t.Fatalf("err = %v, want the API error with err_code 10158", err)
	}
}

// FuzzParsePubAck: on any input, parsePubAck agrees with the encoding/json
// decoding jetstream's PublishMsg does.
func FuzzParsePubAck(f *testing.F) {
	for _, in := range pubAckSeeds {
		f.Add([]byte(in))
	}
	f.Fuzz(samePubAck)
}

func samePubAck(t *testing.T, data []byte) {
	want, wantErr := decodeLikeJetStream(data)
	got, gotErr := parsePubAck(data)
	var wantAPI, gotAPI *jetstream.APIError
	switch {
	case errors.As(wantErr, &wantAPI):
		if !errors.As(gotErr, &gotAPI) || gotAPI.Code != wantAPI.Code || gotAPI.ErrorCode != wantAPI.ErrorCode ||
			(comparableStrings(data) && gotAPI.Description != wantAPI.Description) {
			t.Fatalf("%q: got %v, want API error %+v", data, gotErr, wantAPI)
		}
	case wantErr != nil:
		if !errors.Is(gotErr, jetstream.ErrInvalidJSAck) {
			t.Fatalf("%q: got %+v, %v; want %v", data, got, gotErr, wantErr)
		}
	default:
		if gotErr != nil {
			t.Fatalf("%q: got %v, want %+v", data, gotErr, want)
		}
		if got.Sequence != want.Sequence || got.Duplicate != want.Duplicate ||
			(comparableStrings(data) && (got.Stream != want.Stream || got.Domain != want.Domain || got.Value != want.Value)) {
			t.Fatalf("%q: got %+v, want %+v", data, got, want)
		}
	}
}

// comparableStrings: encoding/json replaces invalid UTF-8 and lone
// surrogates with U+FFFD, where gjson keeps the bytes; a PubAck's strings
// are stream and domain names, so only that mending differs.
func comparableStrings(data []byte) bool {
	return utf8.Valid(data) && !bytes.Contains(data, []byte(`\u`))
}
