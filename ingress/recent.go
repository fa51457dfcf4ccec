package ingress

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/intakehq/intake/pkg/envelope"
)

// Bounds of the recent-deliveries table (recentDeliveries).
const (
	// recentTTL is how long a published delivery is remembered: longer than
	// a flood needs to be answered from memory, far shorter than any
	// provider's first retry is worth limiting (seconds to minutes).
	recentTTL = 10 * time.Second
	// recentRepeats is how many repeats of one delivery, within recentTTL,
	// are answered duplicate from memory (with a receipt, as any retry):
	// more than a provider sends, even concurrently. More get 429 until it
	// is forgotten, without a receipt: a replay loop writes no history.
	recentRepeats = 10
	// recentShards × recentPerShard bound the table: 65,536 deliveries, at
	// most ~2 MiB (24 bytes an entry with the map's overhead); more published within recentTTL (6,500/s per instance,
	// past what one instance takes) start a shard over, so a repeat may
	// then reach JetStream again, as before the table.
	recentShards   = 64
	recentPerShard = 1024
)

// recentDeliveries remembers, for recentTTL, the deliveries this instance
// published and JetStream confirmed (accepted or duplicate), by a 64-bit
// hash of their scoped key and body: the stream's own notion of a
// duplicate (Nats-Msg-Id is the key and a payload hash). A captured
// delivery replayed in a loop verifies every time (forever where no signed
// timestamp bounds it); answered from here it spends neither the
// integration's rate limit nor a publish, so genuine deliveries keep their
// budget (issue 30, item 4). Where the id is not signed (github, shopify,
// hmac with a header id) a capture sent under a fresh id is another
// delivery here: the processor's replay guard refuses it (docs/security.md
// says what it spends). Only verified, published deliveries enter, so
// unsigned floods cannot fill it. The seed is the process's own: hashes cannot be
// aimed at another delivery's.
type recentDeliveries struct {
	seed   maphash.Seed
	ttl    time.Duration
	shards [recentShards]recentShard
}

type recentShard struct {
	mu sync.Mutex
	m  map[delivery]recentEntry
	_  [40]byte // a shard per cache line: requests on other shards do not contend
}

type recentEntry struct {
	until   int64  // unix nanoseconds after which it is forgotten
	repeats uint32 // repeats answered from memory
}

// newRecentDeliveries remembers deliveries for ttl (recentTTL at most: the
// stream's duplicate window may be shorter, and a "duplicate" from memory
// must be one the stream would answer too).
func newRecentDeliveries(ttl time.Duration) *recentDeliveries {
	r := &recentDeliveries{seed: maphash.MakeSeed(), ttl: min(ttl, recentTTL)}
	for i := range r.shards {
		r.shards[i].m = make(map[delivery]recentEntry, recentPerShard)
	}
	return r
}

// delivery is one delivery as the table knows it: the hash of its scoped
// key and body.
type delivery uint64

// of hashes a delivery: its scoped key and its body.
func (r *recentDeliveries) of(key envelope.Key, body []byte) delivery {
	var h maphash.Hash
	h.SetSeed(r.seed)
	_, _ = h.WriteString(key.Integration)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(key.Account)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(key.EventID)
	_ = h.WriteByte(0)
	_, _ = h.Write(body)
	return delivery(h.Sum64())
}

func (r *recentDeliveries) shard(d delivery) *recentShard {
	return &r.shards[d>>58] // the top 6 bits: recentShards is 64
}

// repeat reports whether d was published within the table's ttl; if so,
// ok says it is within its repeats (answer duplicate), else wait is how
// long until it is forgotten (answer 429).
func (r *recentDeliveries) repeat(d delivery, now time.Time) (seen, ok bool, wait time.Duration) {
	sh := r.shard(d)
	ns := now.UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, found := sh.m[d]
	if !found || ns >= e.until {
		return false, false, 0
	}
	if e.repeats < recentRepeats {
		e.repeats++
		sh.m[d] = e
		return true, true, 0
	}
	return true, false, time.Duration(e.until - ns)
}

// remember records that d was published at now. A full
// shard forgets what expired; when that frees less than a quarter, it
// starts over (rare: a shard holds what its share of 6,500/s publishes in
// recentTTL).
func (r *recentDeliveries) remember(d delivery, now time.Time) {
	sh := r.shard(d)
	ns := now.UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, found := sh.m[d]; found && ns < e.until {
		return // a JetStream duplicate of a delivery remembered: keep its repeats
	}
	if len(sh.m) >= recentPerShard {
		for k, e := range sh.m {
			if ns >= e.until {
				delete(sh.m, k)
			}
		}
		if len(sh.m) > recentPerShard*3/4 {
			clear(sh.m)
		}
	}
	sh.m[d] = recentEntry{until: ns + int64(r.ttl)}
}
