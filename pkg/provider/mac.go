package provider

import (
	"crypto/hmac"
	"hash"
)

// firstMatch returns the index of the first key whose HMAC over the
// concatenated parts equals want, or -1. hmac.Equal compares in constant
// time; trying the keys in order reveals only which index matched, which
// the secret-index metric publishes anyway.
func firstMatch(newHash func() hash.Hash, keys [][]byte, want []byte, parts ...[]byte) int {
	var buf [64]byte // room for SHA-512
	for i, key := range keys {
		m := hmac.New(newHash, key)
		for _, p := range parts {
			m.Write(p)
		}
		if hmac.Equal(m.Sum(buf[:0]), want) {
			return i
		}
	}
	return -1
}

// secretKeys returns the secrets as HMAC keys, bytes as written.
func secretKeys(secrets []string) [][]byte {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		keys[i] = []byte(s)
	}
	return keys
}
