package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sign produces the headers a provider would send for body, signed with
// cfg.Secrets[secretIndex]. It serves `intake send`, the load generators and
// tests; it is the sending side of each scheme, so it shares no code path
// with verification beyond the standard library.
func Sign(cfg Config, secretIndex int, eventID string, body []byte, now time.Time) (http.Header, error) {
	if secretIndex < 0 || secretIndex >= len(cfg.Secrets) {
		return nil, fmt.Errorf("secrets[%d]: no such secret", secretIndex)
	}
	secret := cfg.Secrets[secretIndex]
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	switch cfg.Provider {
	case "standard":
		key, err := standardSigningKey(secret)
		if err != nil {
			return nil, fmt.Errorf("secrets[%d]: %w", secretIndex, err)
		}
		ts := strconv.FormatInt(now.Unix(), 10)
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(eventID + "." + ts + "."))
		mac.Write(body)
		h.Set("webhook-id", eventID)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	case "hmac":
		newHash := sha256.New
		if strings.EqualFold(cfg.HMAC.Algorithm, "sha512") {
			newHash = sha512.New
		}
		mac := hmac.New(func() hash.Hash { return newHash() }, []byte(secret))
		mac.Write(body)
		sum := mac.Sum(nil)
		enc := hex.EncodeToString(sum)
		if strings.EqualFold(cfg.HMAC.Encoding, "base64") {
			enc = base64.StdEncoding.EncodeToString(sum)
		}
		h.Set(cfg.HMAC.Header, cfg.HMAC.Prefix+enc)
		if cfg.EventID.Header != "" {
			h.Set(cfg.EventID.Header, eventID)
		}
	default:
		return nil, fmt.Errorf("provider %q: signing not supported", cfg.Provider)
	}
	return h, nil
}

func standardSigningKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return nil, fmt.Errorf("whsec secret is not base64 after the prefix")
	}
	return key, nil
}
