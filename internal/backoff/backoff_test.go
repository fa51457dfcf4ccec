package backoff

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

func TestCeiling(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{
		{-3, 100 * time.Millisecond},
		{0, 100 * time.Millisecond},
		{1, 200 * time.Millisecond},
		{5, 3200 * time.Millisecond},
		{6, 5 * time.Second},
		{62, 5 * time.Second},
		{math.MaxInt, 5 * time.Second}, // no overflow
	} {
		if got := b.Ceiling(tc.attempt); got != tc.want {
			t.Errorf("Ceiling(%d) = %s, want %s", tc.attempt, got, tc.want)
		}
	}
	// Max below Min: Max wins.
	if got := (Backoff{Min: time.Second, Max: 10 * time.Millisecond}).Ceiling(0); got != 10*time.Millisecond {
		t.Errorf("Ceiling with Max < Min = %s, want Max", got)
	}
}

// TestNextStaysWithinBounds is a property test: for every attempt, every
// wait lies in [Ceiling/2, Ceiling] and never above Max.
func TestNextStaysWithinBounds(t *testing.T) {
	for _, b := range []Backoff{
		{Min: 100 * time.Millisecond, Max: 5 * time.Second},
		{Min: 250 * time.Millisecond, Max: 2 * time.Second},
		{Min: time.Nanosecond, Max: time.Hour},
		{Min: 1, Max: 1},
	} {
		for attempt := -1; attempt < 70; attempt++ {
			c := b.Ceiling(attempt)
			for range 200 {
				d := b.Next(attempt)
				if d < c/2 || d > c || d > b.Max {
					t.Fatalf("%+v: Next(%d) = %s, want within [%s, %s]", b, attempt, d, c/2, c)
				}
			}
		}
	}
}

// TestNextSpreads checks the jitter: waits for one attempt cover their
// range rather than clustering, so retries of many processes spread out.
func TestNextSpreads(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for _, attempt := range []int{0, 3, 10} {
		c := b.Ceiling(attempt)
		const n = 2000
		var buckets [5]int // [c/2, c] in fifths
		distinct := map[time.Duration]bool{}
		for range n {
			d := b.Next(attempt)
			distinct[d] = true
			i := min(int(float64(d-c/2)/float64(c-c/2)*5), 4)
			buckets[i]++
		}
		if len(distinct) < n/2 {
			t.Errorf("attempt %d: only %d distinct waits in %d", attempt, len(distinct), n)
		}
		// Uniform expects n/5 = 400 per bucket; 250 is far outside chance.
		for i, k := range buckets {
			if k < 250 {
				t.Errorf("attempt %d: bucket %d of [%s, %s] got %d of %d waits: %v", attempt, i, c/2, c, k, n, buckets)
			}
		}
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if time.Since(start) > time.Minute {
		t.Fatal("Sleep waited although ctx was done")
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(0) on a cancelled context = %v, want context.Canceled", err)
	}
}
