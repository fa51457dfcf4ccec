package stream

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

func TestPassingErrorsAreRetriedRefusalsAreNot(t *testing.T) {
	for _, c := range []struct {
		name    string
		err     jetstream.APIError
		passing bool
	}{
		{"jetstream unavailable", jetstream.APIError{Code: 503, ErrorCode: 10008}, true},
		{"too many requests", jetstream.APIError{Code: 429, ErrorCode: 10167}, true},
		{"not the leader (an election)", jetstream.APIError{Code: 500, ErrorCode: 10009}, true},
		{"consumer offline", jetstream.APIError{Code: 500, ErrorCode: 10119}, true},
		{"consumer cannot be updated", jetstream.APIError{Code: 500, ErrorCode: 10012}, false},
		{"stream not found", jetstream.APIError{Code: 404, ErrorCode: 10059}, false},
		{"bad configuration", jetstream.APIError{Code: 400, ErrorCode: 10052}, false},
	} {
		if got := passing(&c.err); got != c.passing {
			t.Errorf("%s: passing = %v, want %v", c.name, got, c.passing)
		}
	}
}
