package provider

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"hash/crc32"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// paypalRig is a certificate authority and a PayPal-like certificate
// server on 127.0.0.1, and a paypal verifier trusting that authority.
type paypalRig struct {
	key     *rsa.PrivateKey
	srv     *httptest.Server
	fetches atomic.Int32
	status  atomic.Int32 // the cert server's answer; 0: 200
	v       *paypal
}

func newPayPalRig(t testing.TB, webhookIDs ...string) *paypalRig {
	t.Helper()
	r := &paypalRig{}
	caKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test root"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Unix(1_600_000_000, 0), NotAfter: time.Unix(2_000_000_000, 0)}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	r.key, _ = rsa.GenerateKey(rand.Reader, 2048)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "messageverificationcerts.example"},
		NotBefore: time.Unix(1_600_000_000, 0), NotAfter: time.Unix(1_900_000_000, 0), KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &r.key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.fetches.Add(1)
		if s := r.status.Load(); s != 0 {
			w.WriteHeader(int(s))
			return
		}
		_, _ = w.Write(pemBytes)
	}))
	t.Cleanup(r.srv.Close)
	v, err := New(Config{Provider: "paypal", Secrets: webhookIDs, Tolerance: DefaultTolerance, KeyURLHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	r.v = v.(*paypal)
	r.v.certs.client = r.srv.Client()
	r.v.certs.client.Timeout = 2 * time.Second
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	r.v.certs.roots = roots
	return r
}

// headers signs body as PayPal does.
func (r *paypalRig) headers(t testing.TB, id, webhookID string, at time.Time, body string) http.Header {
	t.Helper()
	ts := at.UTC().Format(time.RFC3339)
	crc := strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10)
	digest := sha256.Sum256([]byte(id + "|" + ts + "|" + webhookID + "|" + crc))
	sig, err := rsa.SignPKCS1v15(rand.Reader, r.key, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	return hdr("Paypal-Transmission-Id", id, "Paypal-Transmission-Time", ts, "Paypal-Cert-Url", r.srv.URL+"/v1/notifications/certs/CERT-360caa42",
		"Paypal-Auth-Algo", "SHA256withRSA", "Paypal-Transmission-Sig", base64.StdEncoding.EncodeToString(sig))
}

func TestPayPalVerify(t *testing.T) {
	r := newPayPalRig(t, "WH-OLD", "WH-7Y7254563A4550640-11V2185806837105M")
	now := time.Unix(1_700_000_000, 0)
	const body = `{"id":"WH-2WR32451HC0233532-67976317FL4543714","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"42311647XV020574X"}}`
	good := r.headers(t, "69cd13f0-d67a-11e5-baa3-778b53f4ae55", "WH-7Y7254563A4550640-11V2185806837105M", now, body)
	ev, err := r.v.Verify(&Request{Header: good, Body: []byte(body), Now: now})
	if want := (Identity{ID: "WH-2WR32451HC0233532-67976317FL4543714", Type: "PAYMENT.CAPTURE.COMPLETED", SecretIndex: 1}); err != nil || ev != want {
		t.Fatalf("Verify = %+v, %v", ev, err)
	}
	// The certificate is cached: the second delivery fetches nothing.
	other := r.headers(t, "t-2", "WH-OLD", now, body)
	if _, err := r.v.Verify(&Request{Header: other, Body: []byte(body), Now: now}); err != nil || r.fetches.Load() != 1 {
		t.Fatalf("second: %v, %d fetches", err, r.fetches.Load())
	}

	set := func(h http.Header, k, v string) http.Header { h = h.Clone(); h.Set(k, v); return h }
	for _, tt := range []struct {
		name   string
		header http.Header
		body   string
		now    time.Time
		err    error
	}{
		{"a tampered body", good, body + " ", now, ErrBadSignature},
		{"another webhook's signature", r.headers(t, "t-3", "WH-OTHER", now, body), body, now, ErrBadSignature},
		{"stale", r.headers(t, "t-4", "WH-OLD", now.Add(-10*time.Minute), body), body, now, ErrTimestamp},
		{"a certificate URL on another host", set(good, "Paypal-Cert-Url", "https://evil.example/cert.pem"), body, now, ErrBadSignature},
		{"a certificate URL over http", set(good, "Paypal-Cert-Url", "http://127.0.0.1/cert.pem"), body, now, ErrBadSignature},
		{"another algorithm", set(good, "Paypal-Auth-Algo", "SHA1withRSA"), body, now, ErrBadSignature},
		{"no signature", set(good, "Paypal-Transmission-Sig", ""), body, now, ErrMissingHeader},
		// The signature covers a CRC32 only: a transmission id seen with
		// another body is refused, whatever the signature.
		{"a used transmission id, another body", r.headers(t, "69cd13f0-d67a-11e5-baa3-778b53f4ae55", "WH-OLD", now, `{"id":"WH-FORGED","event_type":"x"}`), `{"id":"WH-FORGED","event_type":"x"}`, now, ErrBadSignature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if ev, err := r.v.Verify(&Request{Header: tt.header, Body: []byte(tt.body), Now: tt.now}); !errors.Is(err, tt.err) {
				t.Fatalf("Verify = %+v, %v; want %v", ev, err, tt.err)
			}
		})
	}
	if r.fetches.Load() != 1 {
		t.Fatalf("%d fetches: a refused URL was fetched", r.fetches.Load())
	}
}

func TestPayPalCertificateUnavailable(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	const body = `{"id":"WH-1","event_type":"x"}`

	r := newPayPalRig(t, "WH-1")
	r.status.Store(http.StatusInternalServerError)
	if _, err := r.v.Verify(&Request{Header: r.headers(t, "a", "WH-1", now, body), Body: []byte(body), Now: now}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a failing certificate server: %v", err)
	}
	// Not cached: the next delivery fetches again, and verifies.
	r.status.Store(0)
	if _, err := r.v.Verify(&Request{Header: r.headers(t, "b", "WH-1", now, body), Body: []byte(body), Now: now}); err != nil {
		t.Fatalf("after recovery: %v", err)
	}

	// A certificate that chains to no trusted root is refused, not retried.
	r2 := newPayPalRig(t, "WH-1")
	r2.v.certs.roots = x509.NewCertPool()
	if _, err := r2.v.Verify(&Request{Header: r2.headers(t, "c", "WH-1", now, body), Body: []byte(body), Now: now}); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("an untrusted certificate: %v", err)
	}

	// A certificate server that does not answer in time.
	r3 := newPayPalRig(t, "WH-1")
	hang := make(chan struct{})
	slow := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-req.Context().Done():
		case <-hang:
		}
	}))
	t.Cleanup(func() { close(hang); slow.Close() })
	r3.v.certs.client = slow.Client()
	r3.v.certs.client.Timeout = 100 * time.Millisecond
	h := r3.headers(t, "d", "WH-1", now, body)
	h.Set("Paypal-Cert-Url", slow.URL+"/cert.pem")
	if _, err := r3.v.Verify(&Request{Header: h, Body: []byte(body), Now: now}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a slow certificate server: %v", err)
	}
	if Reason(ErrUnavailable) != "key_unavailable" {
		t.Fatal("reason")
	}
	if _, err := New(Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: HMACConfig{Header: "X"}, EventID: Field{Field: "id"}, KeyURLHosts: []string{"a"}}); err == nil {
		t.Fatal("key_url_hosts on hmac was accepted")
	}
	if _, err := New(Config{Provider: "paypal", Secrets: []string{"WH-1"}, KeyURLHosts: []string{"https://a.example/"}}); err == nil {
		t.Fatal("a URL as a host was accepted")
	}
}

// FuzzPayPalVerify: whatever the headers, a certificate URL off the
// allowlist is never fetched, and any failure wraps a sentinel; success
// needs the RSA signature of the transmission's signed text.
func FuzzPayPalVerify(f *testing.F) {
	r := newPayPalRig(f, "WH-1")
	now := time.Unix(1_700_000_000, 0)
	const body = `{"id":"WH-E","event_type":"x"}`
	h := r.headers(f, "t-1", "WH-1", now, body)
	f.Add(h.Get("Paypal-Transmission-Id"), h.Get("Paypal-Transmission-Time"), h.Get("Paypal-Cert-Url"), h.Get("Paypal-Transmission-Sig"), body)
	f.Add("t", "2023-11-14T22:13:20Z", "https://evil.example/c", "AAAA", body)
	f.Add("t", "2023-11-14T22:13:20Z", "https://127.0.0.1.evil.example/c", "AAAA", body)
	f.Fuzz(func(t *testing.T, id, ts, certURL, sig, b string) {
		before := r.fetches.Load()
		hh := hdr("Paypal-Transmission-Id", id, "Paypal-Transmission-Time", ts, "Paypal-Cert-Url", certURL,
			"Paypal-Auth-Algo", "SHA256withRSA", "Paypal-Transmission-Sig", sig)
		_, err := r.v.Verify(&Request{Header: hh, Body: []byte(b), Now: now})
		if err != nil {
			checkSentinel(t, err)
		}
		if !r.v.certs.allowed(certURL) && r.fetches.Load() != before {
			t.Fatalf("fetched %q, off the allowlist", certURL)
		}
		if err == nil {
			raw, _ := base64.StdEncoding.DecodeString(sig)
			crc := strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(b))), 10)
			digest := sha256.Sum256([]byte(id + "|" + ts + "|WH-1|" + crc))
			if rsa.VerifyPKCS1v15(&r.key.PublicKey, crypto.SHA256, digest[:], raw) != nil {
				t.Fatalf("accepted an unsigned transmission")
			}
		}
	})
}

// TestPayPalOneFetchPerURL: deliveries arriving together for one
// certificate URL cost one fetch; the others wait for it.
func TestPayPalOneFetchPerURL(t *testing.T) {
	r := newPayPalRig(t, "WH-1")
	now := time.Unix(1_700_000_000, 0)
	const body = `{"id":"WH-E","event_type":"x"}`
	errs := make(chan error, 16)
	for i := range 16 {
		h := r.headers(t, "t-"+strconv.Itoa(i), "WH-1", now, body)
		go func() {
			_, err := r.v.Verify(&Request{Header: h, Body: []byte(body), Now: now})
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := r.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
}
