package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/provider"
)

// kind is what the load generator does with one logical event.
type kind uint8

const (
	kindPlain    kind = iota // 2 parallel deliveries to different ingresses
	kindTriple               // 3 parallel deliveries
	kindLate                 // 2 parallel, then 1 more after the duplicate window
	kindConflict             // 2 parallel, then the same id with another payload
	kindOrdered              // an object version (2 parallel deliveries); versions arrive out of order
)

func (k kind) String() string {
	return [...]string{"plain", "triple", "late", "conflict", "ordered"}[k]
}

// event is one logical provider event and what the client saw of it.
type event struct {
	id      string
	kind    kind
	body    []byte
	sha     string
	bodyB   []byte // kindConflict: the other payload under the same id
	shaB    string
	object  string // kindOrdered
	version int64

	first2xx atomic.Int64 // unix nanos of the first 2xx of any of its deliveries; 0: none
}

func (e *event) ack(at time.Time) {
	n := at.UnixNano()
	for {
		cur := e.first2xx.Load()
		if (cur != 0 && cur <= n) || e.first2xx.CompareAndSwap(cur, n) {
			return
		}
	}
}

// plan builds the run's events, shuffled so that kinds, and the versions
// of each object, arrive interleaved and out of order.
func plan(o Options, runID string) []*event {
	rng := rand.New(rand.NewPCG(o.Seed, 1))
	n := o.Events
	objects := int(float64(n) * o.OrderShare / float64(o.VersionsPerObject))
	nOrdered := objects * o.VersionsPerObject
	nConflict := int(float64(n) * o.ConflictShare)
	nLate := int(float64(n) * o.LateShare)
	nTriple := int(float64(n) * o.TripleShare)

	events := make([]*event, 0, n)
	for obj := range objects {
		for v := 1; v <= o.VersionsPerObject; v++ {
			id := fmt.Sprintf("ord_%s_%04d_v%d", runID, obj, v)
			objID := fmt.Sprintf("obj_%s_%04d", runID, obj)
			body := mustJSON(map[string]any{"id": id, "type": "object.updated",
				"object": map[string]any{"id": objID, "version": v, "status": "v" + strconv.Itoa(v)}})
			events = append(events, &event{id: id, kind: kindOrdered, body: body, object: objID, version: int64(v)})
		}
	}
	for i := 0; len(events) < n; i++ {
		k := kindPlain
		switch j := len(events) - nOrdered; {
		case j < nConflict:
			k = kindConflict
		case j < nConflict+nLate:
			k = kindLate
		case j < nConflict+nLate+nTriple:
			k = kindTriple
		}
		id := fmt.Sprintf("evt_%s_%06d", runID, i)
		e := &event{id: id, kind: k, body: eventBody(id, i, "a")}
		if k == kindConflict {
			e.bodyB = eventBody(id, i, "b")
			e.shaB = envelope.PayloadSHA256(e.bodyB)
		}
		events = append(events, e)
	}
	for _, e := range events {
		e.sha = envelope.PayloadSHA256(e.body)
	}
	rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	return events
}

// eventBody is a Standard Webhooks style event of a few hundred bytes.
func eventBody(id string, n int, variant string) []byte {
	return mustJSON(map[string]any{
		"id": id, "type": "invoice.paid",
		"data": map[string]any{
			"invoice": fmt.Sprintf("in_%08d", n), "amount": 1000 + n%5000, "currency": "eur",
			"variant": variant, "note": "chaos harness delivery; the body is identical on every retry of a variant",
		},
	})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return b
}

// load delivers the planned events like a provider: signed, in parallel to
// different ingresses, retried with backoff until a 2xx, some responses
// lost on purpose.
type load struct {
	o       Options
	events  []*event
	ingress []string // host:port of every ingress
	integ   string   // integration name
	signer  provider.Config
	client  *http.Client

	dispatched    atomic.Int64 // events started
	httpAttempts  atomic.Int64
	lostResponses atomic.Int64
	lateSent      atomic.Int64

	mu      sync.Mutex
	answers map[string]int  // "200 accepted", "503", "transport error", …
	took    []time.Duration // answer time of every answered attempt (partition.go)
	late    sync.WaitGroup
}

func newLoad(o Options, events []*event, ingress []string, integ string, signer provider.Config) *load {
	return &load{
		o: o, events: events, ingress: ingress, integ: integ, signer: signer,
		client: &http.Client{
			Timeout: 15 * time.Second,
			Transport: &http.Transport{
				MaxIdleConnsPerHost: o.InFlight * 3,
				IdleConnTimeout:     30 * time.Second,
				DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			},
		},
		answers: map[string]int{},
	}
}

// run starts events at o.Rate, at most o.InFlight at once, and returns when
// every delivery (late ones included) got its 2xx, or ctx ended.
func (l *load) run(ctx context.Context) error {
	sem := make(chan struct{}, l.o.InFlight)
	var wg sync.WaitGroup
	start := time.Now()
	interval := time.Duration(float64(time.Second) / l.o.Rate)
	for i, e := range l.events {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		select {
		case <-ctx.Done():
		case sem <- struct{}{}:
		}
		if ctx.Err() != nil {
			break
		}
		l.dispatched.Add(1)
		wg.Go(func() {
			defer func() { <-sem }()
			l.deliverEvent(ctx, e, i)
		})
	}
	wg.Wait()
	l.late.Wait()
	l.client.CloseIdleConnections()
	return ctx.Err()
}

func (l *load) deliverEvent(ctx context.Context, e *event, i int) {
	rng := rand.New(rand.NewPCG(l.o.Seed, uint64(i)+2))
	copies := 2
	if e.kind == kindTriple {
		copies = 3
	}
	var wg sync.WaitGroup
	for c := range copies {
		seed := rng.Uint64()
		wg.Go(func() { l.deliver(ctx, e, e.body, i+c, seed) })
	}
	wg.Wait()
	switch e.kind {
	case kindConflict:
		// After the original is acknowledged: the provider "changed" the
		// event and sends it under the same id.
		l.deliver(ctx, e, e.bodyB, i, rng.Uint64())
	case kindLate:
		// Past the window the stream no longer knows the id: only the
		// inbox can recognise this delivery.
		seed := rng.Uint64()
		l.late.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(l.o.DuplicateWindow + time.Second):
			}
			l.lateSent.Add(1)
			l.deliver(ctx, e, e.body, i+1, seed)
		})
	}
}

// deliver POSTs body until an ingress answers 2xx, rotating over the
// ingresses like a load balancer would, with exponential backoff. A share
// of attempts is sent and then abandoned without reading the answer.
func (l *load) deliver(ctx context.Context, e *event, body []byte, first int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0))
	backoff := 50 * time.Millisecond
	for attempt := 0; ctx.Err() == nil; attempt++ {
		addr := l.ingress[(first+attempt)%len(l.ingress)]
		hdr, err := provider.Sign(l.signer, 0, e.id, body, time.Now())
		if err != nil {
			l.count("sign error: " + err.Error())
			return
		}
		l.httpAttempts.Add(1)
		if rng.Float64() < l.o.LostShare {
			l.lostResponses.Add(1)
			l.sendAndDrop(ctx, addr, hdr, body, rng)
		} else if l.post(ctx, addr, hdr, body) {
			e.ack(time.Now())
			return
		}
		// Full jitter: parallel deliveries that failed together do not
		// retry together.
		sleep := time.Duration(rng.Int64N(int64(backoff))) + backoff/2
		backoff = min(backoff*2, 2*time.Second)
		select {
		case <-ctx.Done():
		case <-time.After(sleep):
		}
	}
}

func (l *load) url(addr string) string { return "http://" + addr + "/webhooks/" + l.integ }

// post sends one attempt and reports whether it was answered 2xx.
func (l *load) post(ctx context.Context, addr string, hdr http.Header, body []byte) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url(addr), bytes.NewReader(body))
	if err != nil {
		l.count("request error")
		return false
	}
	req.Header = hdr
	start := time.Now()
	resp, err := l.client.Do(req)
	if err != nil {
		l.count("transport error")
		return false
	}
	l.mu.Lock()
	l.took = append(l.took, time.Since(start))
	l.mu.Unlock()
	defer resp.Body.Close()
	var a struct {
		Status string `json:"status"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_ = json.Unmarshal(raw, &a)
	l.count(strconv.Itoa(resp.StatusCode) + " " + a.Status)
	return resp.StatusCode/100 == 2
}

// sendAndDrop writes the whole request on a fresh connection and closes it
// without reading the answer: the provider's "response lost" (a timeout, a
// reset load balancer). Ingress may or may not have persisted the event;
// either way the provider retries.
func (l *load) sendAndDrop(ctx context.Context, addr string, hdr http.Header, body []byte, rng *rand.Rand) {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		l.count("transport error")
		return
	}
	defer conn.Close()
	req, err := http.NewRequest(http.MethodPost, l.url(addr), bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header = hdr
	_ = conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
	if err := req.Write(conn); err != nil {
		l.count("transport error")
		return
	}
	// Sometimes drop at once, sometimes while ingress is publishing.
	time.Sleep(time.Duration(rng.Int64N(int64(20 * time.Millisecond))))
	l.count("response dropped")
}

func (l *load) count(answer string) {
	l.mu.Lock()
	l.answers[answer]++
	l.mu.Unlock()
}

func (l *load) answerCounts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.answers))
	for k, v := range l.answers {
		out[k] = v
	}
	return out
}
