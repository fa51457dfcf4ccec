// Package hmacpool keeps one key's HMAC states for reuse. A fresh
// hmac.New per message allocates two hash states and their pads and hashes
// the key's two pad blocks again; ingress's providers verify, and the
// dispatcher signs, a message at a time under keys fixed at start, so each
// key keeps its states in a sync.Pool instead.
package hmacpool

import (
	"crypto/hmac"
	"hash"
	"sync"
)

// Key is one key's HMAC under one hash, its states reused. Safe for
// concurrent use.
type Key struct{ pool sync.Pool }

// New is the HMAC of newHash under key.
func New(newHash func() hash.Hash, key []byte) *Key {
	k := &Key{}
	k.pool.New = func() any { return hmac.New(newHash, key) }
	return k
}

// Sum appends the HMAC of the parts, concatenated, to out.
func (k *Key) Sum(out []byte, parts ...[]byte) []byte {
	h := k.pool.Get().(hash.Hash)
	h.Reset()
	for _, p := range parts {
		h.Write(p)
	}
	out = h.Sum(out)
	k.pool.Put(h)
	return out
}
