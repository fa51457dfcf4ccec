package hmacpool_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"sync"
	"testing"

	"github.com/intakehq/intake/internal/hmacpool"
)

// A Key's sum is a fresh hmac.New's over the parts concatenated, for each
// hash, from many goroutines at once, with reused states and a non-empty
// out kept in front.
func TestSumIsAFreshHMACs(t *testing.T) {
	key := []byte("a-key-of-some-length-0123456789")
	parts := [][]byte{[]byte("v0:1700000000:"), bytes.Repeat([]byte("b"), 3000), nil, []byte("tail")}
	for name, newHash := range map[string]func() hash.Hash{"sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New} {
		fresh := hmac.New(newHash, key)
		for _, p := range parts {
			fresh.Write(p)
		}
		want := fresh.Sum([]byte("prefix"))
		k := hmacpool.New(newHash, key)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 50 {
					if got := k.Sum([]byte("prefix"), parts...); !bytes.Equal(got, want) {
						t.Errorf("%s: %x, want %x", name, got, want)
						return
					}
				}
			})
		}
		wg.Wait()
	}
}
