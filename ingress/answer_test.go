package ingress

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
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

// discardWriter is a ResponseWriter that keeps nothing but its header map.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}

// writeStored is writeAnswer, byte for byte and allocation for allocation,
// for an integration without an acknowledgement; Adyen's is "[accepted]".
func TestWriteStored(t *testing.T) {
	a := Answer{Status: "accepted", Key: "ady/acct/7914073381342284:AUTHORISATION"}
	plain := &integration{}
	got, want := httptest.NewRecorder(), httptest.NewRecorder()
	writeStored(got, plain, a)
	writeAnswer(want, 200, a)
	if got.Code != want.Code || got.Body.String() != want.Body.String() || !reflect.DeepEqual(got.Header(), want.Header()) {
		t.Fatalf("writeStored = %d %q %v, writeAnswer %d %q %v", got.Code, got.Body, got.Header(), want.Code, want.Body, want.Header())
	}
	w := discardWriter{h: http.Header{}}
	stored := testing.AllocsPerRun(100, func() { writeStored(w, plain, a) })
	answer := testing.AllocsPerRun(100, func() { writeAnswer(w, 200, a) })
	if stored != answer {
		t.Errorf("writeStored allocates %v, writeAnswer %v", stored, answer)
	}

	rec := httptest.NewRecorder()
	writeStored(rec, &integration{ack: []byte("[accepted]")}, a)
	if rec.Code != 200 || rec.Body.String() != "[accepted]" || rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" ||
		rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("adyen: %d %q %v", rec.Code, rec.Body, rec.Header())
	}
}
