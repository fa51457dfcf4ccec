package ingress

import (
	"testing"
	"time"
)

// The first rejectLogBurst lines of a window pass; the first line of the
// next window says how many the last one left out; pairs are apart.
func TestRejectLogKeepsABurstAndCountsTheRest(t *testing.T) {
	var l rejectLog
	t0 := time.Unix(1000, 0)
	for i := range rejectLogBurst + 7 {
		ok, sup := l.allow("gh", "bad_signature", t0.Add(time.Duration(i)*time.Millisecond))
		if ok != (i < rejectLogBurst) || sup != 0 {
			t.Fatalf("line %d: ok %v suppressed %d", i, ok, sup)
		}
	}
	if ok, _ := l.allow("gh", "rate_limited", t0); !ok {
		t.Fatal("another reason shares the first one's budget")
	}
	if ok, sup := l.allow("gh", "bad_signature", t0.Add(rejectLogWindow)); !ok || sup != 7 {
		t.Fatalf("next window's first line: ok %v suppressed %d, want true 7", ok, sup)
	}
	if ok, sup := l.allow("gh", "bad_signature", t0.Add(rejectLogWindow+time.Millisecond)); !ok || sup != 0 {
		t.Fatalf("its second line: ok %v suppressed %d, want true 0", ok, sup)
	}
}
