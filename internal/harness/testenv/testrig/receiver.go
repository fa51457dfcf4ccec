package testrig

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Receiver is an HTTP destination for tests: it refuses every delivery
// with its refusal status and message until Accept, then answers accepted
// and counts what it took.
type Receiver struct {
	URL    string
	refuse atomic.Bool
	got    atomic.Int32
}

// NewReceiver starts a Receiver that refuses with status and msg (closed
// when the test ends); accepted is the status it answers once it accepts.
func NewReceiver(t testing.TB, status int, msg string, accepted int) *Receiver {
	r := &Receiver{}
	r.refuse.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if r.refuse.Load() {
			http.Error(w, msg, status)
			return
		}
		r.got.Add(1)
		w.WriteHeader(accepted)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Accept makes the receiver take every later delivery.
func (r *Receiver) Accept() { r.refuse.Store(false) }

// Got is how many deliveries it took.
func (r *Receiver) Got() int { return int(r.got.Load()) }
