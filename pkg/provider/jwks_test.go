package provider

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// jwkOf writes pub as a JWK with kid.
func jwkOf(kid string, pub crypto.PublicKey) map[string]string {
	enc := base64.RawURLEncoding.EncodeToString
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": enc(k)}
	case *ecdsa.PublicKey:
		return map[string]string{"kty": "EC", "crv": "P-256", "kid": kid, "x": enc(k.X.FillBytes(make([]byte, 32))), "y": enc(k.Y.FillBytes(make([]byte, 32)))}
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "kid": kid, "n": enc(k.N.Bytes()), "e": enc(big.NewInt(int64(k.E)).Bytes())}
	}
	panic("no JWK for this key")
}

func jwksOf(keys ...map[string]string) []byte {
	b, _ := json.Marshal(map[string]any{"keys": keys})
	return b
}

// jwksRig is a sender's key set on an httptest TLS server, which a test
// rotates, fails or slows, and an ed25519 pubkey verifier fetching it.
type jwksRig struct {
	srv     *httptest.Server
	set     atomic.Pointer[[]byte]
	status  atomic.Int32 // the server's answer; 0: 200 and the set
	fetches atomic.Int32
	v       *pubKeyVerifier
}

func newJWKSRig(t testing.TB, set []byte) *jwksRig {
	t.Helper()
	r := &jwksRig{}
	r.set.Store(&set)
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.fetches.Add(1)
		if s := r.status.Load(); s != 0 {
			w.WriteHeader(int(s))
			return
		}
		_, _ = w.Write(*r.set.Load())
	}))
	t.Cleanup(r.srv.Close)
	r.v = newJWKSVerifier(t, r.srv, "ed25519")
	return r
}

// newJWKSVerifier is a pubkey verifier of alg on srv's /jwks.json, its
// fetches trusting srv's certificate.
func newJWKSVerifier(t testing.TB, srv *httptest.Server, alg string) *pubKeyVerifier {
	t.Helper()
	v, err := New(Config{Provider: "pubkey", Tolerance: DefaultTolerance, KeyURLHosts: []string{"127.0.0.1"},
		PubKey:  PubKeyConfig{Algorithm: alg, Header: "X-Sig", KeyURL: srv.URL + "/jwks.json", KIDHeader: "X-Kid"},
		EventID: Field{Field: "id"}})
	if err != nil {
		t.Fatal(err)
	}
	pv := v.(*pubKeyVerifier)
	pv.jwks.client = srv.Client()
	pv.jwks.client.Timeout = 2 * time.Second
	return pv
}

func edDelivery(priv ed25519.PrivateKey, kid, body string) *Request {
	return &Request{Header: hdr("X-Sig", base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(body))), "X-Kid", kid), Body: []byte(body)}
}

// TestJWKSVerify: keys from the sender's key set, picked by kid; the set
// is cached, an unknown kid fetches it again at most once per
// jwksRefetchInterval (a rotation; 503 meanwhile), and is refused once the
// set it fetched lacks it.
func TestJWKSVerify(t *testing.T) {
	pubA, privA, _ := ed25519.GenerateKey(rand.Reader)
	pubB, privB, _ := ed25519.GenerateKey(rand.Reader)
	r := newJWKSRig(t, jwksOf(jwkOf("a", pubA)))
	now := time.Unix(1_700_000_000, 0)
	const body = `{"id":"evt_1"}`
	at := func(req *Request, d time.Duration) *Request { req.Now = now.Add(d); return req }
	step := func(name string, req *Request, wantErr error, wantFetches int32) {
		t.Helper()
		ev, err := r.v.Verify(req)
		switch {
		case wantErr == nil && (err != nil || ev.ID != "evt_1" || ev.SecretIndex != 0):
			t.Fatalf("%s: Verify = %+v, %v", name, ev, err)
		case wantErr != nil && !errors.Is(err, wantErr):
			t.Fatalf("%s: Verify = %+v, %v; want %v", name, ev, err, wantErr)
		}
		if err != nil {
			checkSentinel(t, err)
		}
		if got := r.fetches.Load(); got != wantFetches {
			t.Fatalf("%s: %d fetches, want %d", name, got, wantFetches)
		}
	}
	step("signed by a", at(edDelivery(privA, "a", body), 0), nil, 1)
	step("cached", at(edDelivery(privA, "a", body), time.Second), nil, 1)
	step("a tampered body", at(&Request{Header: edDelivery(privA, "a", body).Header, Body: []byte(`{"id":"evt_2"}`)}, 0), ErrBadSignature, 1)
	step("signed by b under kid a", at(edDelivery(privB, "a", body), 0), ErrBadSignature, 1)
	step("no kid", at(&Request{Header: hdr("X-Sig", "AAAA"), Body: []byte(body)}, 0), ErrMissingHeader, 1)
	step("a kid too long", at(edDelivery(privA, strings.Repeat("k", maxKIDBytes+1), body), 0), ErrBadSignature, 1)

	// A kid the set lacks, within jwksRefetchInterval of the fetch: no
	// fetch, 503 (the set may have rotated since).
	step("unknown kid x within the interval", at(edDelivery(privB, "x", body), 2*time.Second), ErrUnavailable, 1)
	// Past it: one fetch; still absent, a bad signature.
	const i = jwksRefetchInterval
	step("unknown kid x past the interval", at(edDelivery(privB, "x", body), i), ErrBadSignature, 2)
	step("unknown kid y within the next", at(edDelivery(privB, "y", body), i+time.Second), ErrUnavailable, 2)
	// A rotation: 503 until the interval allows a fetch, then verified.
	r.set.Store(ptr(jwksOf(jwkOf("b", pubB))))
	step("rotated to b, within the interval", at(edDelivery(privB, "b", body), i+30*time.Second), ErrUnavailable, 2)
	step("rotated to b, past the interval", at(edDelivery(privB, "b", body), 2*i), nil, 3)
	step("b cached", at(edDelivery(privB, "b", body), 2*i+time.Second), nil, 3)
	// The set is fetched again when its cache expires; a, gone from the
	// set just fetched, is a bad signature at once.
	step("a after the cache expired", at(edDelivery(privA, "a", body), 2*i+keyCacheTTL), ErrBadSignature, 4)
	// Concurrent deliveries for a set not cached share one fetch.
	r2 := newJWKSRig(t, jwksOf(jwkOf("a", pubA)))
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			_, err := r2.v.Verify(at(edDelivery(privA, "a", body), 0))
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := r2.fetches.Load(); n != 1 {
		t.Fatalf("16 deliveries together: %d fetches, want 1", n)
	}
}

func ptr[T any](v T) *T { return &v }

// TestJWKSAlgorithms: ECDSA P-256 (DER and r‖s) and RSA (PKCS#1 v1.5, PSS)
// keys from a key set; the set's keys of other kinds are skipped.
func TestJWKSAlgorithms(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ed, _, _ := ed25519.GenerateKey(rand.Reader)
	set := jwksOf(jwkOf("ed", ed), jwkOf("ec", &ec.PublicKey), jwkOf("rsa", &rk.PublicKey))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(set) }))
	t.Cleanup(srv.Close)
	const body = `{"id":"evt_1"}`
	digest := sha256.Sum256([]byte(body))
	der, _ := ecdsa.SignASN1(rand.Reader, ec, digest[:])
	er, es, _ := ecdsa.Sign(rand.Reader, ec, digest[:])
	pkcs, _ := rsa.SignPKCS1v15(rand.Reader, rk, crypto.SHA256, digest[:])
	pss, _ := rsa.SignPSS(rand.Reader, rk, crypto.SHA256, digest[:], nil)
	b64 := base64.StdEncoding.EncodeToString
	for _, tt := range []struct {
		alg, kid string
		sig      []byte
		err      error
	}{
		{"ecdsa-p256", "ec", der, nil},
		{"ecdsa-p256", "ec", append(er.FillBytes(make([]byte, 32)), es.FillBytes(make([]byte, 32))...), nil},
		{"rsa-pkcs1v15", "rsa", pkcs, nil},
		{"rsa-pss", "rsa", pss, nil},
		{"rsa-pss", "rsa", pkcs, ErrBadSignature},
		// The ed25519 key is not an ECDSA key: skipped, so its kid is unknown.
		{"ecdsa-p256", "ed", der, ErrBadSignature},
	} {
		t.Run(tt.alg+"/"+tt.kid, func(t *testing.T) {
			v := newJWKSVerifier(t, srv, tt.alg)
			ev, err := v.Verify(&Request{Header: hdr("X-Sig", b64(tt.sig), "X-Kid", tt.kid), Body: []byte(body), Now: time.Unix(1_700_000_000, 0)})
			if tt.err == nil && (err != nil || ev.ID != "evt_1") || tt.err != nil && !errors.Is(err, tt.err) {
				t.Fatalf("Verify = %+v, %v; want %v", ev, err, tt.err)
			}
		})
	}
}

// TestJWKSUnavailable: a key set that cannot be had now is never a
// verdict: 503 (ErrUnavailable) with nothing cached, so the next delivery
// fetches again; a slow set makes only its own integration's requests
// wait, and those wait for one fetch.
func TestJWKSUnavailable(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Unix(1_700_000_000, 0)
	const body = `{"id":"evt_1"}`
	r := newJWKSRig(t, jwksOf(jwkOf("a", pub)))
	for _, tt := range []struct {
		name   string
		status int
		set    []byte
	}{
		{"a failing server", http.StatusInternalServerError, nil},
		{"not a JWKS", 0, []byte(`<html>`)},
		{"no ed25519 key", 0, jwksOf(map[string]string{"kty": "RSA", "kid": "a", "n": "AQAB", "e": "AQAB"})},
		{"over 64 KiB", 0, append([]byte(`{"keys":[],"x":"`), strings.Repeat("a", maxKeyBytes)...)},
	} {
		r.status.Store(int32(tt.status))
		if tt.set != nil {
			r.set.Store(ptr(tt.set))
		}
		req := edDelivery(priv, "a", body)
		req.Now = now
		if _, err := r.v.Verify(req); !errors.Is(err, ErrUnavailable) || Reason(err) != "key_unavailable" {
			t.Fatalf("%s: %v", tt.name, err)
		}
	}
	r.status.Store(0)
	r.set.Store(ptr(jwksOf(jwkOf("a", pub))))
	req := edDelivery(priv, "a", body)
	req.Now = now
	if _, err := r.v.Verify(req); err != nil {
		t.Fatalf("after recovery: %v", err)
	}

	// A slow key set: its integration's requests wait for one fetch,
	// bounded by the timeout; another integration's answer at once.
	arrived, release := make(chan struct{}, 16), make(chan struct{})
	slow := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		arrived <- struct{}{}
		select {
		case <-req.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); slow.Close() })
	sv := newJWKSVerifier(t, slow, "ed25519")
	sv.jwks.client.Timeout = 500 * time.Millisecond
	const waiting = 8
	errs := make(chan error, waiting)
	for range waiting {
		go func() {
			req := edDelivery(priv, "a", body)
			req.Now = now
			_, err := sv.Verify(req)
			errs <- err
		}()
	}
	<-arrived
	other := edDelivery(priv, "a", body)
	other.Now = now
	if _, err := r.v.Verify(other); err != nil {
		t.Fatalf("another integration while a key set is slow: %v", err)
	}
	if len(errs) != 0 {
		t.Fatalf("the slow integration answered before its fetch ended")
	}
	for range waiting {
		if err := <-errs; !errors.Is(err, ErrUnavailable) {
			t.Fatalf("a slow key set: %v", err)
		}
	}
	if n := len(arrived); n != 0 {
		t.Fatalf("%d more fetches of the slow set: its requests did not share one", n)
	}
}

func TestJWKSConfig(t *testing.T) {
	pk := func(p PubKeyConfig, secrets []string, hosts []string) Config {
		p.Algorithm, p.Header = "ed25519", "X-Sig"
		return Config{Provider: "pubkey", Secrets: secrets, KeyURLHosts: hosts, PubKey: p, EventID: Field{Field: "id"}}
	}
	edKey := hex.EncodeToString(make([]byte, 32))
	for _, tt := range []struct {
		name   string
		cfg    Config
		errHas string
	}{
		{"http", pk(PubKeyConfig{KeyURL: "http://keys.example/jwks.json"}, nil, nil), "pubkey.key_url"},
		{"no host", pk(PubKeyConfig{KeyURL: "https:///jwks.json"}, nil, nil), "pubkey.key_url"},
		{"user information", pk(PubKeyConfig{KeyURL: "https://u:p@keys.example/jwks.json"}, nil, nil), "pubkey.key_url"},
		{"off key_url_hosts", pk(PubKeyConfig{KeyURL: "https://keys.example/jwks.json"}, nil, []string{"other.example"}), "key_url_hosts"},
		{"a URL as a host", pk(PubKeyConfig{KeyURL: "https://keys.example/jwks.json"}, nil, []string{"https://keys.example"}), "key_url_hosts[0]"},
		{"secrets beside key_url", pk(PubKeyConfig{KeyURL: "https://keys.example/jwks.json"}, []string{edKey}, nil), "secrets: not with pubkey.key_url"},
		{"kid_header without key_url", pk(PubKeyConfig{KIDHeader: "X-Kid"}, []string{edKey}, nil), "pubkey.kid_header"},
		{"a bad kid_header", pk(PubKeyConfig{KeyURL: "https://keys.example/jwks.json", KIDHeader: "X Kid"}, nil, nil), "pubkey.kid_header"},
		{"key_url_hosts with configured keys", pk(PubKeyConfig{}, []string{edKey}, []string{"keys.example"}), "key_url_hosts: only"},
		{"neither keys nor key_url", pk(PubKeyConfig{}, nil, nil), "secrets: at least one"},
	} {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: %v, want it to name %q", tt.name, err, tt.errHas)
		}
	}
	// key_url_hosts defaults to key_url's host; a port is allowed in the URL.
	for _, c := range []Config{
		pk(PubKeyConfig{KeyURL: "https://keys.example/jwks.json"}, nil, nil),
		pk(PubKeyConfig{KeyURL: "https://KEYS.example:8443/.well-known/jwks.json", KIDHeader: "X-Kid"}, nil, []string{"other.example", "keys.example"}),
	} {
		if _, err := New(c); err != nil {
			t.Errorf("%+v: %v", c.PubKey, err)
		}
	}
}

// FuzzParseJWKS: whatever the set, what is kept is at most maxJWKSKeys
// keys of the algorithm (RSA of 2048 to 8192 bits, ECDSA on P-256), each
// kid's keys among them; a refusal is ErrUnavailable.
func FuzzParseJWKS(f *testing.F) {
	ed, _, _ := ed25519.GenerateKey(rand.Reader)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	f.Add(jwksOf(jwkOf("a", ed), jwkOf("b", &ec.PublicKey), jwkOf("c", &rk.PublicKey)))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","use":"enc"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA","alg":"ES256"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, alg := range []string{"ed25519", "ecdsa-p256", "rsa-pkcs1v15"} {
			set, err := parseJWKS(alg, b)
			if err != nil {
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("%s: %v", alg, err)
				}
				continue
			}
			if len(set.all) == 0 || len(set.all) > maxJWKSKeys {
				t.Fatalf("%s: %d keys", alg, len(set.all))
			}
			for _, k := range set.all {
				switch k := k.(type) {
				case ed25519.PublicKey:
					if alg != "ed25519" || len(k) != ed25519.PublicKeySize {
						t.Fatalf("%s: an ed25519 key", alg)
					}
				case *ecdsa.PublicKey:
					if alg != "ecdsa-p256" || k.Curve != elliptic.P256() {
						t.Fatalf("%s: an ECDSA key", alg)
					}
				case *rsa.PublicKey:
					if alg != "rsa-pkcs1v15" || k.N.BitLen() < minRSABits || k.N.BitLen() > maxRSABits || k.E < 3 || k.E%2 == 0 {
						t.Fatalf("%s: an RSA key of %d bits, e %d", alg, k.N.BitLen(), k.E)
					}
				default:
					t.Fatalf("%s: a %T", alg, k)
				}
			}
			n := 0
			for _, ks := range set.byKID {
				n += len(ks)
			}
			if n > len(set.all) {
				t.Fatalf("%s: %d keys by kid, %d in all", alg, n, len(set.all))
			}
		}
	})
}
