package ingress

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/intakehq/intake/pkg/envelope"
)

// Bounds of the recent-deliveries table (recentDeliveries).
const (
	// recentTTL is how long a published delivery is remembered: a replay
	// loop then reaches JetStream (and the integration's limit) once per
	// recentTTL, while any provider's retries come seconds to minutes
	// apart. Short, so that the table stays small at full rate.
	recentTTL = 2 * time.Second
	// recentRepeats is how many repeats of one delivery, within recentTTL,
	// are answered duplicate from memory (with a receipt, as any retry):
	// more than a provider sends, even concurrently. More get 429 until it
	// is forgotten, without a receipt: a replay loop writes no history.
	recentRepeats = 10
	// recentShards × recentPerShard bound the table: 16,384 entries (a
	// delivery is one, two where the id is unsigned), ~320 KiB (16 bytes an
	// entry and the map's overhead, allocated at start); more published
	// within recentTTL (8,000/s per instance, past what one instance takes
	// here) start a shard over, so a repeat may then reach JetStream again,
	// as before the table.
	recentShards   = 64
	recentPerShard = 256
)

// recentDeliveries remembers, for recentTTL, the deliveries this instance
// published and JetStream confirmed (accepted or duplicate), by a 64-bit
// hash of their scoped key and body: the stream's own notion of a
// duplicate (Nats-Msg-Id is the key and a payload hash). A captured
// delivery replayed in a loop verifies every time (forever where no signed
// timestamp bounds it); answered from here it spends neither the
// integration's rate limit nor a publish, so genuine deliveries keep their
// budget (issue 30, item 4). Where the id is not signed (github, shopify,
// hmac with a header id: the integrations whose replay guard is on) a
// capture can come back under any id; there the body is remembered too,
// so a copy under a fresh id is known as one (copied) and spends a budget
// of its own, not the genuine sender's, on its way to the processor's
// replay guard. Only verified, published deliveries enter, so unsigned
// floods cannot fill it. The seed is the process's own: hashes cannot be
// aimed at another delivery's.
type recentDeliveries struct {
	seed   maphash.Seed
	ttl    time.Duration
	shards [recentShards]recentShard
}

type recentShard struct {
	mu sync.Mutex
	m  map[uint64]recentEntry
	_  [48]byte // a shard per 64-byte cache line: requests on other shards do not contend
}

// recentEntry is when an entry is forgotten, in unix milliseconds, above
// the repeats answered from memory (the low 8 bits): 8 bytes.
type recentEntry uint64

func newRecentEntry(untilMilli int64) recentEntry { return recentEntry(untilMilli << 8) }

func (e recentEntry) until() int64 { return int64(e >> 8) }

func (e recentEntry) repeats() int { return int(e & 0xff) }

// newRecentDeliveries remembers deliveries for ttl (recentTTL at most: the
// stream's duplicate window may be shorter, and a "duplicate" from memory
// must be one the stream would answer too).
func newRecentDeliveries(ttl time.Duration) *recentDeliveries {
	r := &recentDeliveries{seed: maphash.MakeSeed(), ttl: min(ttl, recentTTL)}
	for i := range r.shards {
		r.shards[i].m = make(map[uint64]recentEntry, recentPerShard)
	}
	return r
}

// delivery is one delivery as the table knows it: the hash of its scoped
// key and body, and, where the id is unsigned, of its integration and body
// (0 elsewhere).
type delivery struct{ sum, body uint64 }

// of hashes a delivery: its scoped key and its body, and with unsignedID
// its integration and body.
func (r *recentDeliveries) of(key envelope.Key, body []byte, unsignedID bool) delivery {
	var h maphash.Hash
	h.SetSeed(r.seed)
	_, _ = h.WriteString(key.Integration)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(key.Account)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(key.EventID)
	_ = h.WriteByte(0)
	_, _ = h.Write(body)
	d := delivery{sum: h.Sum64()}
	if unsignedID {
		h.Reset()
		_, _ = h.WriteString(key.Integration)
		_ = h.WriteByte(1) // never a key's hash: that has a 0 here
		_, _ = h.Write(body)
		d.body = h.Sum64()
	}
	return d
}

func (r *recentDeliveries) shard(sum uint64) *recentShard {
	return &r.shards[sum>>58] // the top 6 bits: recentShards is 64
}

// repeat reports whether d was published within the table's ttl; if so,
// ok says it is within its repeats (answer duplicate), else wait is how
// long until it is forgotten (answer 429).
func (r *recentDeliveries) repeat(d delivery, now time.Time) (seen, ok bool, wait time.Duration) {
	sh := r.shard(d.sum)
	ms := now.UnixMilli()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, found := sh.m[d.sum]
	if !found || ms >= e.until() {
		return false, false, 0
	}
	if e.repeats() < recentRepeats {
		sh.m[d.sum] = e + 1
		return true, true, 0
	}
	return true, false, time.Duration(e.until()-ms) * time.Millisecond
}

// copied reports whether d's body was published within the table's ttl
// under another scoped key (d.body is 0 where the id is signed).
func (r *recentDeliveries) copied(d delivery, now time.Time) bool {
	if d.body == 0 {
		return false
	}
	sh := r.shard(d.body)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, found := sh.m[d.body]
	return found && now.UnixMilli() < e.until()
}

// remember records that d was published at now: its key and body, and
// where the id is unsigned its body alone.
func (r *recentDeliveries) remember(d delivery, now time.Time) {
	r.add(d.sum, now)
	if d.body != 0 {
		r.add(d.body, now)
	}
}

// add enters sum at now. A full shard forgets what expired; when that
// frees less than a quarter, it starts over (rare: a shard holds what its
// share of 8,000/s publishes in recentTTL).
func (r *recentDeliveries) add(sum uint64, now time.Time) {
	sh := r.shard(sum)
	ms := now.UnixMilli()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, found := sh.m[sum]; found && ms < e.until() {
		return // a JetStream duplicate of a delivery remembered: keep its repeats
	}
	if len(sh.m) >= recentPerShard {
		for k, e := range sh.m {
			if ms >= e.until() {
				delete(sh.m, k)
			}
		}
		if len(sh.m) > recentPerShard*3/4 {
			clear(sh.m)
		}
	}
	sh.m[sum] = newRecentEntry(ms + r.ttl.Milliseconds())
}
