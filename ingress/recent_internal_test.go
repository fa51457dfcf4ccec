package ingress

import (
	"strconv"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/envelope"
)

// TestRecentDeliveriesMemoryIsBounded: a million deliveries published
// within the ttl (far past what an instance takes) leave at most
// recentShards × recentPerShard entries, and the latest is still
// remembered; past the ttl nothing is.
func TestRecentDeliveriesMemoryIsBounded(t *testing.T) {
	r := newRecentDeliveries(time.Minute)
	now := time.Now()
	body := []byte(`{}`)
	var last delivery
	for i := range 1_000_000 {
		last = r.of(envelope.Key{Integration: "gh", EventID: strconv.Itoa(i)}, body, false)
		r.remember(last, now)
	}
	n := 0
	for i := range r.shards {
		n += len(r.shards[i].m)
	}
	if n > recentShards*recentPerShard {
		t.Fatalf("%d entries, want at most %d", n, recentShards*recentPerShard)
	}
	if seen, ok, _ := r.repeat(last, now); !seen || !ok {
		t.Fatalf("the latest delivery is forgotten")
	}
	if seen, _, _ := r.repeat(last, now.Add(recentTTL)); seen {
		t.Fatalf("a delivery is remembered past the ttl (%s)", recentTTL)
	}
}

// BenchmarkRecentDeliveries is the table's cost on ingress's path for a
// new delivery: hash its key and 1 KiB body, look it up, remember it.
//
//	go test -run '^$' -bench RecentDeliveries ./ingress/
func BenchmarkRecentDeliveries(b *testing.B) {
	r := newRecentDeliveries(recentTTL)
	body := make([]byte, 1<<10)
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := envelope.Key{Integration: "std", Account: "main", EventID: "evt_0123456789"}
		i := 0
		for pb.Next() {
			i++
			body[0] = byte(i)
			d := r.of(key, body, false)
			if seen, _, _ := r.repeat(d, now); !seen {
				r.remember(d, now)
			}
		}
	})
}
