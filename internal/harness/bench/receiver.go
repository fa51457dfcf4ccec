package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// receiver is the destination of the dispatcher stage: a bare net/http
// server on loopback that reads the body and answers 204. Bare, it only
// counts what it answers and when (the throughput passes, where the bare
// client posts to it too). Recording, it also verifies each delivery's
// signature with the Standard Webhooks reference library and keeps its own
// record — which message arrived, told by the id in its body (never by a
// header Intake sets), under which webhook-id, how often — from which the
// outage and kill verdicts are drawn, never from Intake's counters. down
// closes its listener and connections (connection refused) and up brings
// it back on the same address.
type receiver struct {
	addr string
	wh   *standardwebhooks.Webhook // nil: bare

	mu       sync.Mutex
	srv      *http.Server // nil while down
	served   chan struct{}
	n        int // deliveries answered 204 since reset
	first    time.Time
	last     time.Time
	firstCh  chan struct{} // closed at the first delivery since reset
	byEvent  map[string]*receipt
	bad      int // signatures that did not verify (answered 401)
	unparsed int // bodies without the harness's id (answered 400)
}

// receipt is one message's deliveries, as the receiver saw them.
type receipt struct {
	n          int
	webhookIDs []string // distinct, in order of arrival
	first      time.Time
}

// startReceiver listens on a free loopback port. With secret (a whsec_
// key), it records and verifies; without, it is bare.
func startReceiver(secret string) (*receiver, error) {
	rc := &receiver{firstCh: make(chan struct{})}
	if secret != "" {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			return nil, err
		}
		rc.wh, rc.byEvent = wh, map[string]*receipt{}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rc.addr = ln.Addr().String()
	rc.serve(ln)
	return rc, nil
}

func (rc *receiver) url() string { return "http://" + rc.addr + "/" }

func (rc *receiver) serve(ln net.Listener) {
	srv := &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan struct{})
	rc.mu.Lock()
	rc.srv, rc.served = srv, served
	rc.mu.Unlock()
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
}

// down closes the listener and every connection: the next connection is
// refused. Down when down does nothing.
func (rc *receiver) down() {
	rc.mu.Lock()
	srv, served := rc.srv, rc.served
	rc.srv = nil
	rc.mu.Unlock()
	if srv == nil {
		return
	}
	_ = srv.Close()
	<-served
}

// up listens on the same address again.
func (rc *receiver) up(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		ln, err := net.Listen("tcp", rc.addr)
		if err == nil {
			rc.serve(ln)
			return nil
		}
		// The port was ours; another process may hold it for a moment.
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 100 {
			return fmt.Errorf("receiver: listen again on %s: %w", rc.addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// close stops the receiver for good.
func (rc *receiver) close() { rc.down() }

// reset starts counting afresh (a throughput pass).
func (rc *receiver) reset() {
	rc.mu.Lock()
	rc.n, rc.first, rc.last = 0, time.Time{}, time.Time{}
	rc.firstCh = make(chan struct{})
	rc.mu.Unlock()
}

// firstDelivery is closed at the first delivery since reset.
func (rc *receiver) firstDelivery() <-chan struct{} {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.firstCh
}

// count is the deliveries answered 204 since reset, and the first and the
// last one's time.
func (rc *receiver) count() (n int, first, last time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.n, rc.first, rc.last
}

// distinct is how many messages arrived at least once (recording).
func (rc *receiver) distinct() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.byEvent)
}

// has reports whether every one of ids arrived (recording).
func (rc *receiver) has(ids []string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, id := range ids {
		if rc.byEvent[id] == nil {
			return false
		}
	}
	return true
}

// record is a copy of what the receiver saw, by event id (recording).
func (rc *receiver) record() (byEvent map[string]receipt, bad, unparsed int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	byEvent = make(map[string]receipt, len(rc.byEvent))
	for id, r := range rc.byEvent {
		byEvent[id] = receipt{n: r.n, webhookIDs: append([]string(nil), r.webhookIDs...), first: r.first}
	}
	return byEvent, rc.bad, rc.unparsed
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable) // the connection broke: retried
		return
	}
	now := time.Now()
	if rc.wh == nil {
		rc.mu.Lock()
		rc.count1(now)
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	verr := rc.wh.Verify(body, r.Header)
	id, ok := bodyID(body)
	rc.mu.Lock()
	switch {
	case verr != nil:
		rc.bad++
	case !ok:
		rc.unparsed++
	default:
		rc.count1(now)
		rc.note(id, r.Header.Get("webhook-id"), now)
	}
	rc.mu.Unlock()
	switch {
	case verr != nil:
		http.Error(w, "signature: "+verr.Error(), http.StatusUnauthorized)
	case !ok:
		http.Error(w, "no id in the body", http.StatusBadRequest)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// count1 counts one delivery; rc.mu held.
func (rc *receiver) count1(now time.Time) {
	if rc.n == 0 {
		rc.first = now
		close(rc.firstCh)
	}
	rc.n++
	rc.last = now
}

// note records event id's delivery under webhookID; rc.mu held.
func (rc *receiver) note(id, webhookID string, now time.Time) {
	r := rc.byEvent[id]
	if r == nil {
		r = &receipt{first: now}
		rc.byEvent[id] = r
	}
	r.n++
	for _, w := range r.webhookIDs {
		if w == webhookID {
			return
		}
	}
	r.webhookIDs = append(r.webhookIDs, webhookID)
}

// bodyID reads the id the harness put first in each body
// (requests.body: {"id":"…",…}).
func bodyID(body []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(body, []byte(`{"id":"`))
	if !ok {
		return "", false
	}
	id, _, ok := bytes.Cut(rest, []byte(`"`))
	return string(id), ok && len(id) > 0
}
