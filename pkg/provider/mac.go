package provider

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"github.com/intakehq/intake/internal/hmacpool"
)

// firstMatch returns the index of the first key (one pool per configured
// secret, each fixed to its hash) whose HMAC over the concatenated parts
// equals want, or -1. hmac.Equal compares in constant time; trying the keys
// in order reveals only which index matched, which the secret-index metric
// publishes anyway.
func firstMatch(keys []*hmacpool.Key, want []byte, parts ...[]byte) int {
	var buf [64]byte // room for SHA-512
	for i, key := range keys {
		if hmac.Equal(key.Sum(buf[:0], parts...), want) {
			return i
		}
	}
	return -1
}

// hmacKeys returns one HMAC key per secret, its bytes as written, its
// states reused (hmacpool: BenchmarkStandardVerify, BenchmarkHMACVerify,
// BenchmarkGitHubVerify).
func hmacKeys(newHash func() hash.Hash, secrets []string) []*hmacpool.Key {
	pools := make([]*hmacpool.Key, len(secrets))
	for i, s := range secrets {
		pools[i] = hmacpool.New(newHash, []byte(s))
	}
	return pools
}

// secretKeys returns the secrets as HMAC keys, bytes as written (the Zoom
// handshake's answer, handshake.go).
func secretKeys(secrets []string) [][]byte {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		keys[i] = []byte(s)
	}
	return keys
}

// macAlgorithm resolves an algorithm option ("" is sha256). SHA-1 is there
// for senders that offer nothing else (Vercel, Intercom): HMAC-SHA1 is not
// broken as a MAC, but it is the one choice here that a future attack would
// reach first, so WeakAlgorithm names it for the start-up warning and metric.
func macAlgorithm(name string) (newHash func() hash.Hash, size int, err error) {
	switch strings.ToLower(name) {
	case "", "sha256":
		return sha256.New, sha256.Size, nil
	case "sha512":
		return sha512.New, sha512.Size, nil
	case "sha1":
		return sha1.New, sha1.Size, nil
	}
	return nil, 0, fmt.Errorf("unknown %q (sha256, sha512 or sha1)", name)
}

// WeakAlgorithm returns the name of the weak hash cfg verifies with ("sha1"),
// or "" when it uses none. Ingress warns at start and exports
// intake_ingress_weak_algorithm for such integrations.
func WeakAlgorithm(cfg Config) string {
	cfg, err := resolvePreset(cfg)
	if err != nil {
		return ""
	}
	alg := cfg.HMAC.Algorithm
	if cfg.Provider == "pairs" {
		alg = cfg.Pairs.Algorithm
	}
	if (cfg.Provider == "hmac" || cfg.Provider == "pairs") && strings.EqualFold(alg, "sha1") || cfg.Provider == "twilio" {
		return "sha1"
	}
	return ""
}

// decodeMAC decodes one signature of size bytes, hex (either case) or
// base64 (standard or URL alphabet, padded or not), into dst (len ≥ size+2).
// It returns false for anything else.
func decodeMAC(dst []byte, s string, size int, b64 bool) bool {
	var n int
	var err error
	if b64 {
		s = strings.TrimRight(s, "=")
		enc := base64.RawStdEncoding
		if strings.ContainsAny(s, "-_") {
			enc = base64.RawURLEncoding
		}
		if len(s) != enc.EncodedLen(size) {
			return false
		}
		n, err = enc.Decode(dst, []byte(s))
	} else {
		if len(s) != hex.EncodedLen(size) {
			return false
		}
		n, err = hex.Decode(dst, []byte(s))
	}
	return err == nil && n == size
}
