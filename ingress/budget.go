package ingress

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Slow bodies: a read that received under slowRate over its last
// slowGrace (a read that stalls after a fast start included) may be cut to
// make room for a new request when the budget is full. Providers send from
// data centres, far faster, and do not pause inside a body.
const (
	slowGrace = time.Second
	slowRate  = 64 << 10 // bytes per second
)

// bodyBudget caps the bytes of request bodies held at once. A request
// reserves its Content-Length (or its integration's limit, when the length
// is not declared) before its body is read; one that does not fit is
// answered 503 at once, unless cutting reads that trickle makes room: a
// few hundred slow uploads must not keep a genuine delivery out.
type bodyBudget struct {
	limit int64

	mu    sync.Mutex
	used  int64
	reads map[*bodyRead]struct{}
}

// bodyRead is one reservation.
type bodyRead struct {
	size    int64
	cut     func() // ends the read at once (a past read deadline)
	evicted atomic.Bool

	mu       sync.Mutex
	winStart time.Time // the current measuring window
	winBytes int64     // bytes read in it
	lastRate float64   // bytes per second over the last full window; -1: none yet
	lastRead time.Time // of the last progress (first: the reservation)
	read     bool      // the body is read: its bytes are in use, not trickling
}

// finished marks the body read: a request that waits for its PubAck is not
// a slow upload and is never cut.
func (r *bodyRead) finished() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.read = true
}

// progress records n bytes read at now.
func (r *bodyRead) progress(n int, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.winBytes += int64(n)
	if n > 0 {
		r.lastRead = now
	}
	if el := now.Sub(r.winStart); el >= slowGrace {
		r.lastRate = float64(r.winBytes) / el.Seconds()
		r.winStart, r.winBytes = now, 0
	}
}

// rate is the read's recent speed at now; false while it is too young to
// tell. A read that received nothing for slowGrace is stalled (0), however
// fast it started.
func (r *bodyRead) rate(now time.Time) (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.read {
		return 0, false
	}
	if now.Sub(r.lastRead) >= slowGrace {
		return 0, true
	}
	if el := now.Sub(r.winStart); el >= slowGrace {
		return float64(r.winBytes) / el.Seconds(), true
	}
	return r.lastRate, r.lastRate >= 0
}

func newBodyBudget(limit int64) *bodyBudget {
	return &bodyBudget{limit: limit, reads: map[*bodyRead]struct{}{}}
}

// reserve reserves size bytes at now, or returns nil when they do not fit
// even after cutting slow reads. cut must end the new read's body reads.
func (b *bodyBudget) reserve(size int64, now time.Time, cut func()) *bodyRead {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+size > b.limit && !b.cutSlow(b.used+size-b.limit, now) {
		return nil
	}
	r := &bodyRead{size: size, cut: cut, winStart: now, lastRead: now, lastRate: -1}
	b.reads[r] = struct{}{}
	b.used += size
	return r
}

// cutSlow cuts the slowest reads slower than slowRate until need bytes are
// free; it cuts none when they cannot free enough.
func (b *bodyBudget) cutSlow(need int64, now time.Time) bool {
	type candidate struct {
		r    *bodyRead
		rate float64
	}
	var slow []candidate
	var total int64
	for r := range b.reads {
		if rate, ok := r.rate(now); ok && rate < slowRate {
			slow = append(slow, candidate{r, rate})
			total += r.size
		}
	}
	if total < need {
		return false
	}
	slices.SortFunc(slow, func(a, b candidate) int {
		switch {
		case a.rate < b.rate:
			return -1
		case a.rate > b.rate:
			return 1
		}
		return 0
	})
	for _, c := range slow {
		if need <= 0 {
			break
		}
		delete(b.reads, c.r)
		b.used -= c.r.size
		need -= c.r.size
		c.r.evicted.Store(true)
		c.r.cut()
	}
	return true
}

// release returns r's bytes; a cut read's were returned when it was cut.
func (b *bodyBudget) release(r *bodyRead) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.reads[r]; ok {
		delete(b.reads, r)
		b.used -= r.size
	}
}
