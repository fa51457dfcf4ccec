package ingress

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

// The hand-written answer is what encoding/json writes for these answers
// (none needs the escaping only encoding/json does), and reads back as the
// same Answer.
func TestWriteAnswerMatchesEncodingJSON(t *testing.T) {
	for _, a := range []Answer{
		{Status: "accepted", Key: "stripe/acct_1/evt_1"},
		{Status: "duplicate", Key: "github/main/7f1e-\"quoted\"\\-\u00e9"},
		{Status: "rejected", Reason: "bad_signature"},
		{Status: "unavailable", Reason: "nats", Key: "a/b/\x01ctl\n"},
	} {
		rec := httptest.NewRecorder()
		writeAnswer(rec, 202, a)
		want, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if got := rec.Body.String(); got != string(want)+"\n" {
			t.Errorf("writeAnswer(%+v) = %q, encoding/json writes %q", a, got, want)
		}
		var back Answer
		if err := json.Unmarshal(rec.Body.Bytes(), &back); err != nil || back != a {
			t.Errorf("%q reads back as %+v, %v", rec.Body.String(), back, err)
		}
		if rec.Code != 202 || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("code %d, headers %v", rec.Code, rec.Header())
		}
	}
}
