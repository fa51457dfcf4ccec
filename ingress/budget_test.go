package ingress

import (
	"testing"
	"time"
)

func TestBodyBudget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBodyBudget(100)
	cuts := map[string]int{}
	cut := func(name string) func() { return func() { cuts[name]++ } }

	fast := b.reserve(40, t0, cut("fast"))
	stalled := b.reserve(30, t0, cut("stalled"))
	done := b.reserve(30, t0, cut("done"))
	if fast == nil || stalled == nil || done == nil {
		t.Fatal("100 bytes of reservations in a budget of 100 refused")
	}
	if b.reserve(1, t0, cut("new")) != nil {
		t.Fatal("a byte over the budget reserved")
	}
	// Young reads are never cut, even when stalled.
	if b.reserve(1, t0.Add(500*time.Millisecond), cut("new")) != nil || len(cuts) != 0 {
		t.Fatalf("cut before slowGrace: %v", cuts)
	}
	done.progress(30, t0.Add(100*time.Millisecond))
	done.finished() // waiting for its PubAck: not an upload any more
	for i := 1; i <= 20; i++ {
		fast.progress(64<<10, t0.Add(time.Duration(i)*100*time.Millisecond))
	}
	at := t0.Add(2 * time.Second)
	// More than the stalled read holds: nothing is cut.
	if b.reserve(31, at, cut("new")) != nil || len(cuts) != 0 {
		t.Fatalf("cut without making enough room: %v", cuts)
	}
	// The stalled one makes room; the fast and the finished ones stay.
	if b.reserve(30, at, cut("new")) == nil {
		t.Fatal("no room made from a stalled read")
	}
	if cuts["stalled"] != 1 || len(cuts) != 1 || !stalled.evicted.Load() || fast.evicted.Load() || done.evicted.Load() {
		t.Fatalf("cuts %v, want the stalled read only", cuts)
	}
	b.release(stalled) // its bytes went back when it was cut
	b.release(fast)
	if b.used != 60 {
		t.Fatalf("used %d after releases, want 60", b.used)
	}
}
