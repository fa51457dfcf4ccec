package provider

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// detachedJWSOf signs body as a compact JWS with the payload detached, its
// protected header header (a JSON object).
func detachedJWSOf(t testing.TB, header string, body []byte, priv crypto.Signer) string {
	t.Helper()
	h64 := base64.RawURLEncoding.EncodeToString([]byte(header))
	var hdrFields struct {
		B64 *bool `json:"b64"`
	}
	_ = json.Unmarshal([]byte(header), &hdrFields)
	input := h64 + "."
	if hdrFields.B64 != nil && !*hdrFields.B64 {
		input += string(body)
	} else {
		input += base64.RawURLEncoding.EncodeToString(body)
	}
	var sig []byte
	switch k := priv.(type) {
	case ed25519.PrivateKey:
		sig = ed25519.Sign(k, []byte(input))
	case *ecdsa.PrivateKey:
		d := sha256.Sum256([]byte(input))
		r, s, err := ecdsa.Sign(rand.Reader, k, d[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...) // JWS: r‖s
	default:
		t.Fatalf("no JWS for %T", priv)
	}
	return h64 + ".." + base64.RawURLEncoding.EncodeToString(sig)
}

// TestDetachedJWS: pubkey.encoding jws — the key named by the JWS
// header's kid (from a key set, or any configured key), the alg held to
// the configured algorithm, b64 honoured only under crit.
func TestDetachedJWS(t *testing.T) {
	pubA, privA, _ := ed25519.GenerateKey(rand.Reader)
	pubB, privB, _ := ed25519.GenerateKey(rand.Reader)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	set := jwksOf(jwkOf("a", pubA), jwkOf("b", pubB), jwkOf("ec", &ec.PublicKey))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(set) }))
	t.Cleanup(srv.Close)
	jwsVerifier := func(alg string) Verifier {
		v, err := New(Config{Provider: "pubkey", Tolerance: DefaultTolerance, KeyURLHosts: []string{"127.0.0.1"},
			PubKey:  PubKeyConfig{Algorithm: alg, Header: "X-JWS-Signature", Encoding: "jws", KeyURL: srv.URL + "/jwks.json"},
			EventID: Field{Field: "id"}})
		if err != nil {
			t.Fatal(err)
		}
		v.(*pubKeyVerifier).jwks.client = srv.Client()
		return v
	}
	ed, es := jwsVerifier("ed25519"), jwsVerifier("ecdsa-p256")
	// The same scheme with the key configured: the kid is not needed.
	configured := newTestVerifier(t, Config{Provider: "pubkey", Secrets: []string{hex.EncodeToString(pubB)},
		PubKey: PubKeyConfig{Algorithm: "ed25519", Header: "X-JWS-Signature", Encoding: "jws"}, EventID: Field{Field: "id"}})
	body := []byte(`{"id":"evt_1","amount":"5 €"}`)
	h := func(sig string) http.Header { return hdr("X-JWS-Signature", sig) }
	for _, tt := range []struct {
		name string
		v    Verifier
		sig  string
		body []byte
		err  error
	}{
		{"EdDSA, kid a", ed, detachedJWSOf(t, `{"alg":"EdDSA","kid":"a"}`, body, privA), body, nil},
		{"EdDSA, kid b", ed, detachedJWSOf(t, `{"alg":"EdDSA","kid":"b"}`, body, privB), body, nil},
		{"RFC 9864's Ed25519", ed, detachedJWSOf(t, `{"alg":"Ed25519","kid":"a"}`, body, privA), body, nil},
		{"no kid: every key tried", ed, detachedJWSOf(t, `{"alg":"EdDSA"}`, body, privB), body, nil},
		{"unencoded payload (RFC 7797)", ed, detachedJWSOf(t, `{"alg":"EdDSA","kid":"a","b64":false,"crit":["b64"]}`, body, privA), body, nil},
		{"ES256, r‖s", es, detachedJWSOf(t, `{"alg":"ES256","kid":"ec"}`, body, ec), body, nil},
		{"a configured key", configured, detachedJWSOf(t, `{"alg":"EdDSA","kid":"anything"}`, body, privB), body, nil},
		{"a tampered body", ed, detachedJWSOf(t, `{"alg":"EdDSA","kid":"a"}`, body, privA), []byte(`{"id":"evt_2"}`), ErrBadSignature},
		{"signed by b, kid a", ed, detachedJWSOf(t, `{"alg":"EdDSA","kid":"a"}`, body, privB), body, ErrBadSignature},
		{"a kid not in the set just fetched", jwsVerifier("ed25519"), detachedJWSOf(t, `{"alg":"EdDSA","kid":"z"}`, body, privA), body, ErrBadSignature},
		{"alg none", ed, base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"a"}`)) + "..AAAA", body, ErrBadSignature},
		{"another algorithm", ed, detachedJWSOf(t, `{"alg":"ES256","kid":"a"}`, body, privA), body, ErrBadSignature},
		{"b64 without crit", ed, detachedJWSOf(t, `{"alg":"EdDSA","kid":"a","b64":false}`, body, privA), body, ErrBadSignature},
		{"an unknown crit", ed, detachedJWSOf(t, `{"alg":"EdDSA","kid":"a","crit":["exp"],"exp":1}`, body, privA), body, ErrBadSignature},
		{"the payload attached", ed, strings.Replace(detachedJWSOf(t, `{"alg":"EdDSA","kid":"a"}`, body, privA), "..", "."+base64.RawURLEncoding.EncodeToString(body)+".", 1), body, ErrBadSignature},
		{"two parts", ed, "eyJhbGciOiJFZERTQSJ9.AAAA", body, ErrBadSignature},
		{"padded base64", ed, detachedJWSOf(t, `{"alg":"EdDSA","kid":"a"}`, body, privA) + "=", body, ErrBadSignature},
		{"a header that is no object", ed, base64.RawURLEncoding.EncodeToString([]byte(`["EdDSA"]`)) + "..AAAA", body, ErrBadSignature},
		{"an empty kid", ed, detachedJWSOf(t, `{"alg":"EdDSA","kid":""}`, body, privA), body, ErrBadSignature},
		{"alg twice", ed, detachedJWSOf(t, `{"alg":"none","alg":"EdDSA","kid":"a"}`, body, privA), body, ErrBadSignature},
		{"alg in capitals beside alg", ed, detachedJWSOf(t, `{"ALG":"none","alg":"EdDSA","kid":"a"}`, body, privA), body, ErrBadSignature},
		{"only ALG", ed, detachedJWSOf(t, `{"ALG":"EdDSA","kid":"a"}`, body, privA), body, ErrBadSignature},
		{"b64 a string", ed, detachedJWSOf(t, `{"alg":"EdDSA","kid":"a","b64":"false","crit":["b64"]}`, body, privA), body, ErrBadSignature},
		{"other members are ignored", ed, detachedJWSOf(t, `{"alg":"EdDSA","kid":"a","typ":"JOSE","iat":1700000000}`, body, privA), body, nil},
		{"no signature header", ed, "", body, ErrMissingHeader},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := tt.v.Verify(&Request{Header: h(tt.sig), Body: tt.body, Now: time.Unix(1_700_000_000, 0)})
			if tt.err == nil {
				if err != nil || ev.ID != "evt_1" {
					t.Fatalf("Verify = %+v, %v", ev, err)
				}
				return
			}
			if !errors.Is(err, tt.err) {
				t.Fatalf("Verify = %+v, %v; want %v", ev, err, tt.err)
			}
			checkSentinel(t, err)
		})
	}
	for _, tt := range []struct {
		name   string
		p      PubKeyConfig
		errHas string
	}{
		{"a template", PubKeyConfig{Template: "{timestamp}{body}", TimestampHeader: "X-Ts"}, "pubkey.encoding"},
		{"a kid header", PubKeyConfig{KeyURL: "https://keys.example/jwks.json", KIDHeader: "X-Kid"}, "pubkey.kid_header"},
	} {
		p := tt.p
		p.Algorithm, p.Header, p.Encoding = "ed25519", "X-Sig", "jws"
		secrets := []string{hex.EncodeToString(pubA)}
		if p.KeyURL != "" {
			secrets = nil
		}
		if _, err := New(Config{Provider: "pubkey", Secrets: secrets, PubKey: p, EventID: Field{Field: "id"}}); err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: %v, want it to name %q", tt.name, err, tt.errHas)
		}
	}
}

// FuzzDetachedJWS: whatever the signature header, a delivery verifies only
// when it is "<header>..<signature>" whose header (read independently,
// with encoding/json into a map: the members appear once, so the readers
// agree) says alg EdDSA or Ed25519, understands every crit, and whose
// signature is the configured key's over the signing input that header's
// b64 calls for.
func FuzzDetachedJWS(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	v, err := New(Config{Provider: "pubkey", Secrets: []string{hex.EncodeToString(pub)},
		PubKey: PubKeyConfig{Algorithm: "ed25519", Header: "X-Sig", Encoding: "jws"}, EventID: Field{Field: "id"}})
	if err != nil {
		f.Fatal(err)
	}
	body := []byte(`{"id":"e"}`)
	f.Add(detachedJWSOf(f, `{"alg":"EdDSA","kid":"a"}`, body, priv), body)
	f.Add(detachedJWSOf(f, `{"alg":"EdDSA","b64":false,"crit":["b64"]}`, body, priv), body)
	f.Add(detachedJWSOf(f, `{"alg":"EdDSA","b64":false}`, body, priv), body)
	f.Add(detachedJWSOf(f, `{"alg":"EdDSA","ALG":"none"}`, body, priv), body)
	f.Add(detachedJWSOf(f, `{"alg":"none","alg":"EdDSA"}`, body, priv), body)
	f.Add("..", body)
	f.Fuzz(func(t *testing.T, sig string, b []byte) {
		_, err := v.Verify(&Request{Header: hdr("X-Sig", sig), Body: b})
		if err != nil {
			checkSentinel(t, err)
			return
		}
		h64, rest, _ := strings.Cut(sig, ".")
		payload, sig64, _ := strings.Cut(rest, ".")
		raw, err1 := base64.RawURLEncoding.DecodeString(h64)
		s, err2 := base64.RawURLEncoding.DecodeString(sig64)
		var header map[string]any
		if payload != "" || err1 != nil || err2 != nil || json.Unmarshal(raw, &header) != nil {
			t.Fatalf("accepted %q", sig)
		}
		if alg := header["alg"]; alg != "EdDSA" && alg != "Ed25519" {
			t.Fatalf("accepted alg %v", alg)
		}
		crit, _ := header["crit"].([]any)
		for _, c := range crit {
			if c != "b64" {
				t.Fatalf("accepted crit %v", crit)
			}
		}
		input := h64 + "." + base64.RawURLEncoding.EncodeToString(b)
		if header["b64"] == false {
			input = h64 + "." + string(b)
		}
		if !ed25519.Verify(pub, []byte(input), s) {
			t.Fatalf("accepted %q, no signature of its signing input", sig)
		}
	})
}

// FuzzJWSHeader: what readJWSHeader reads of a protected header is what
// encoding/json reads into a map (case-sensitive names, the last copy):
// the header it accepts has each member once, so the two agree.
func FuzzJWSHeader(f *testing.F) {
	for _, h := range []string{`{"alg":"EdDSA","kid":"a"}`, `{"alg":"ES256","b64":false,"crit":["b64"]}`, `{"ALG":"x","alg":"y"}`,
		`{"alg":"a","alg":"b"}`, `{"kid":"\u00e9\ud800"}`, `{"crit":[1]}`, `[]`, `{"b64":null}`} {
		f.Add([]byte(h))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		h, err := readJWSHeader(raw)
		if err != nil {
			if !errors.Is(err, ErrBadSignature) {
				t.Fatal(err)
			}
			return
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", raw, err)
		}
		if a, _ := m["alg"].(string); a != h.alg {
			t.Fatalf("alg %q, encoding/json %q", h.alg, a)
		}
		if k, ok := m["kid"].(string); ok != (h.kid != nil) || ok && k != *h.kid {
			t.Fatalf("kid %v, encoding/json %v", h.kid, m["kid"])
		}
		if b, ok := m["b64"].(bool); ok != (h.b64 != nil) || ok && b != *h.b64 {
			t.Fatalf("b64 %v, encoding/json %v", h.b64, m["b64"])
		}
		crit, _ := m["crit"].([]any)
		if len(crit) != len(h.crit) {
			t.Fatalf("crit %v, encoding/json %v", h.crit, crit)
		}
		for i := range crit {
			if crit[i] != h.crit[i] {
				t.Fatalf("crit %v, encoding/json %v", h.crit, crit)
			}
		}
	})
}
