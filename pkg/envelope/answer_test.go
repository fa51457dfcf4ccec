package envelope_test

import (
	"testing"

	"github.com/intakehq/intake/pkg/envelope"
)

// The answers are wire format (webhook answers, receipts, the deliveries
// table and its SQL): a renamed constant must not change a value.
func TestAnswerValues(t *testing.T) {
	for a, want := range map[envelope.Answer]string{
		envelope.AnswerAccepted:    "accepted",
		envelope.AnswerDuplicate:   "duplicate",
		envelope.AnswerUnavailable: "unavailable",
		envelope.AnswerRejected:    "rejected",
	} {
		if string(a) != want {
			t.Errorf("answer %q, want %q", a, want)
		}
	}
}
