package dispatcher

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"sync"

	"github.com/intakehq/intake/pkg/config"
)

// signer signs deliveries as Standard Webhooks: for each key, "v1," and the
// base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}", the
// signatures separated by spaces, so a receiver holding any one of the
// keys (during a rotation) verifies. Each key keeps its HMAC states for
// reuse: a fresh one per delivery was a third of signing's cost.
type signer struct{ keys []*keyMAC }

// keyMAC is one key and its reusable HMAC states.
type keyMAC struct{ pool sync.Pool }

func newSigner(secrets []string) (signer, error) {
	s := signer{keys: make([]*keyMAC, 0, len(secrets))}
	for i, sec := range secrets {
		k, err := config.DecodeWebhookSecret(sec)
		if err != nil {
			return signer{}, fmt.Errorf("secrets[%d]: %w", i, err)
		}
		km := &keyMAC{}
		km.pool.New = func() any { return hmac.New(sha256.New, k) }
		s.keys = append(s.keys, km)
	}
	return s, nil
}

// sign returns the webhook-signature header's value.
func (s signer) sign(id string, timestamp int64, body []byte) string {
	// "{id}.{timestamp}." in one write; ids are short, so on the stack.
	var head [128]byte
	prefix := append(head[:0], id...)
	prefix = append(prefix, '.')
	prefix = strconv.AppendInt(prefix, timestamp, 10)
	prefix = append(prefix, '.')
	out := make([]byte, 0, len(s.keys)*48)
	var sum [sha256.Size]byte
	for i, k := range s.keys {
		mac := k.pool.Get().(hash.Hash)
		mac.Reset()
		mac.Write(prefix)
		mac.Write(body)
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, "v1,"...)
		out = base64.StdEncoding.AppendEncode(out, mac.Sum(sum[:0]))
		k.pool.Put(mac)
	}
	return string(out)
}
