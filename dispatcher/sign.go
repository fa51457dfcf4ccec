package dispatcher

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/intakehq/intake/pkg/config"
)

// signer signs deliveries as Standard Webhooks: for each key, "v1," and the
// base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}", the
// signatures separated by spaces, so a receiver holding any one of the
// keys (during a rotation) verifies.
type signer struct{ keys [][]byte }

func newSigner(secrets []string) (signer, error) {
	s := signer{keys: make([][]byte, 0, len(secrets))}
	for i, sec := range secrets {
		k, err := config.DecodeWebhookSecret(sec)
		if err != nil {
			return signer{}, fmt.Errorf("secrets[%d]: %w", i, err)
		}
		s.keys = append(s.keys, k)
	}
	return s, nil
}

// sign returns the webhook-signature header's value.
func (s signer) sign(id string, timestamp int64, body []byte) string {
	ts := strconv.FormatInt(timestamp, 10)
	out := make([]byte, 0, len(s.keys)*48)
	var sum [sha256.Size]byte
	for i, k := range s.keys {
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
		mac.Write(body)
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, "v1,"...)
		out = base64.StdEncoding.AppendEncode(out, mac.Sum(sum[:0]))
	}
	return string(out)
}
