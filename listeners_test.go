package intake_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/stream"
)

// startApp builds and starts an App with o (HTTPAddr on a free loopback
// port) and stops it when the test ends.
func startApp(t *testing.T, cfg *config.Config, o intake.Options) *intake.App {
	t.Helper()
	o.HTTPAddr = "127.0.0.1:0"
	a, err := intake.New(context.Background(), cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		_ = a.Stop(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return a
}

// status GETs (or with a body, POSTs) url with c and returns the status.
func status(t *testing.T, c *http.Client, url string, body []byte, h http.Header) int {
	t.Helper()
	method := http.MethodGet
	if body != nil {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if h != nil {
		req.Header = h.Clone()
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestInternalListener: with http.internal_addr set, /metrics and /debug
// answer there and 404 on the public listener; webhooks and /api/v1 stay
// public (and 404 on the internal one); health answers on both.
func TestInternalListener(t *testing.T) {
	t.Parallel()
	cfg, _ := lifecycleConfig(t)
	cfg.HTTP.InternalAddr = "127.0.0.1:0"
	cfg.Debug.Pprof = true
	a := startApp(t, cfg, intake.Options{Roles: intake.Roles{Ingress: true, Replayer: true}})
	if a.InternalAddr() == nil || a.InternalAddr().String() == a.Addr().String() {
		t.Fatalf("InternalAddr() = %v, Addr() = %v: want a second listener", a.InternalAddr(), a.Addr())
	}
	public, internal := "http://"+a.Addr().String(), "http://"+a.InternalAddr().String()
	c := http.DefaultClient

	in, _ := cfg.Integration("demo")
	body := demoBody("evt_internal_1", "hello")
	h, err := provider.Sign(in.Config, len(in.Secrets)-1, "evt_internal_1", body, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		base, path string
		body       []byte
		want       int
	}{
		{public, "/webhooks/demo", body, http.StatusOK},
		{public, "/api/v1/events", nil, http.StatusUnauthorized}, // mounted; no token
		{public, "/metrics", nil, http.StatusNotFound},
		{public, "/debug/pprof/", nil, http.StatusNotFound},
		{public, "/healthz", nil, http.StatusOK},
		{internal, "/metrics", nil, http.StatusOK},
		{internal, "/debug/pprof/", nil, http.StatusOK},
		{internal, "/healthz", nil, http.StatusOK},
		{internal, "/webhooks/demo", body, http.StatusNotFound},
		{internal, "/api/v1/events", nil, http.StatusNotFound},
	} {
		where := "public"
		if tt.base == internal {
			where = "internal"
		}
		if got := status(t, c, tt.base+tt.path, tt.body, h); got != tt.want {
			t.Errorf("%s %s = %d, want %d", where, tt.path, got, tt.want)
		}
	}
	for _, base := range []string{public, internal} {
		testenv.Eventually(t, 30*time.Second, func() bool { return status(t, c, base+"/readyz", nil, nil) == http.StatusOK },
			"%s/readyz never 200", base)
	}
	resp, err := c.Get(internal + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(raw), `intake_ingress_accepted_total{integration="demo"} 1`) {
		t.Errorf("internal /metrics does not count the public listener's delivery:\n%s", raw)
	}
}

// ingressConfig is a configuration for the ingress role alone (no
// Postgres) against a fresh embedded nats-server.
func ingressConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(`
integrations:
  - {name: demo, provider: standard, tenant: acme, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.URL = testenv.NATS(t).URL()
	nc, err := nats.Connect(cfg.NATS.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := stream.Ensure(ctx, js, cfg.NATS.Stream); err != nil { // as `intake migrate` does
		t.Fatal(err)
	}
	return cfg
}

// pair is a self-signed certificate for localhost and 127.0.0.1 and its key.
type pair struct {
	cert         *x509.Certificate
	certPEM, key []byte
}

func selfSigned(t *testing.T, serial int64) pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "intake test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pair{cert: cert, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}
}

// replace writes data to path the way renewal tools do: a new file renamed
// over the old one.
func replace(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// presented is the serial number of the certificate the server at addr
// presents in a new handshake.
func presented(t *testing.T, addr string) int64 {
	t.Helper()
	// Which certificate is presented is the question here, not whether it
	// is trusted; a new connection without a session cache always gets a
	// full handshake.
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // see above
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

func trusting(p pair) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(p.cert)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// TestTLSCertificateIsReloaded: the public listener serves HTTPS with the
// configured pair, and the next handshake after the files change presents
// the new certificate; a pair that does not load keeps the current one
// until the renewal is complete.
func TestTLSCertificateIsReloaded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	p1 := selfSigned(t, 1)
	replace(t, certFile, p1.certPEM)
	replace(t, keyFile, p1.key)
	cfg := ingressConfig(t)
	cfg.HTTP.TLS = config.TLS{CertFile: certFile, KeyFile: keyFile}
	var logs testenv.Buffer
	a := startApp(t, cfg, intake.Options{Roles: intake.Roles{Ingress: true}, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	addr := a.Addr().String()
	base := "https://" + addr

	if got := presented(t, addr); got != 1 {
		t.Fatalf("first handshake presents serial %d, want 1", got)
	}
	// Without http.internal_addr, /metrics is on the one listener: over TLS.
	for _, path := range []string{"/healthz", "/metrics"} {
		if got := status(t, trusting(p1), base+path, nil, nil); got != http.StatusOK {
			t.Errorf("GET %s over TLS = %d, want 200", path, got)
		}
	}
	if got := status(t, http.DefaultClient, "http://"+addr+"/healthz", nil, nil); got != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS listener = %d, want 400", got)
	}

	p2 := selfSigned(t, 2)
	replace(t, keyFile, p2.key)
	replace(t, certFile, p2.certPEM)
	if got := presented(t, addr); got != 2 {
		t.Fatalf("handshake after the files changed presents serial %d, want 2", got)
	}
	if got := status(t, trusting(p2), base+"/healthz", nil, nil); got != http.StatusOK {
		t.Errorf("GET /healthz trusting the new certificate = %d, want 200", got)
	}

	// A renewal written one file at a time: the new certificate with the
	// old key does not load, so the current pair stays until the key comes.
	p3 := selfSigned(t, 3)
	replace(t, certFile, p3.certPEM)
	if got := presented(t, addr); got != 2 {
		t.Fatalf("with a mismatched pair on disk the handshake presents serial %d, want 2 (kept)", got)
	}
	if got := presented(t, addr); got != 2 {
		t.Fatalf("second handshake with the mismatched pair presents serial %d, want 2", got)
	}
	if n := strings.Count(logs.String(), "do not load"); n != 1 {
		t.Errorf("the mismatched pair was logged %d times, want once:\n%s", n, logs.String())
	}
	replace(t, keyFile, p3.key)
	if got := presented(t, addr); got != 3 {
		t.Fatalf("handshake after the key came presents serial %d, want 3", got)
	}

	// A file that disappears keeps the current certificate too.
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if got := presented(t, addr); got != 3 {
		t.Fatalf("with the key file gone the handshake presents serial %d, want 3 (kept)", got)
	}
}

// TestNewFailsOnABadCertificate: a pair that does not load fails New,
// naming the field, before anything listens.
func TestNewFailsOnABadCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p1, p2 := selfSigned(t, 1), selfSigned(t, 2)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	replace(t, certFile, p1.certPEM)
	replace(t, keyFile, p2.key)
	for _, tc := range []struct {
		name string
		tls  config.TLS
	}{
		{"missing files", config.TLS{CertFile: filepath.Join(dir, "none.crt"), KeyFile: filepath.Join(dir, "none.key")}},
		{"mismatched pair", config.TLS{CertFile: certFile, KeyFile: keyFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ingressConfig(t)
			cfg.HTTP.TLS = tc.tls
			listened := false
			a, err := intake.New(context.Background(), cfg, intake.Options{Roles: intake.Roles{Ingress: true},
				HTTPAddr: "127.0.0.1:0", Listening: func(net.Addr) { listened = true }})
			if err == nil {
				_ = a.Stop(context.Background())
				t.Fatal("app.New succeeded with a bad certificate")
			}
			if !strings.Contains(err.Error(), "http.tls") {
				t.Errorf("app.New = %v, want it to name http.tls", err)
			}
			if tc.name == "missing files" && !strings.Contains(err.Error(), "none.crt") {
				t.Errorf("app.New = %v, want the missing file", err)
			}
			if listened {
				t.Fatal("app.New listened although it failed")
			}
		})
	}
}

// TestStartFailsWhenTheInternalAddressIsTaken: Start leaves neither
// listener open when one cannot be bound.
func TestStartFailsWhenTheInternalAddressIsTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := ingressConfig(t)
	cfg.HTTP.InternalAddr = taken.Addr().String()
	public := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	a, err := intake.New(context.Background(), cfg, intake.Options{Roles: intake.Roles{Ingress: true}, HTTPAddr: public})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "http.internal_addr") {
		t.Errorf("Start = %v, want the internal address's error", err)
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Errorf("Stop after a failed Start = %v", err)
	}
	ln, err := net.Listen("tcp", public)
	if err != nil {
		t.Fatalf("the public address stayed bound after the failed Start: %v", err)
	}
	_ = ln.Close()
}

// TestReplayerConnectionCap: a replayer-only process caps its public
// listener at ingress.max_connections as ingress does, so a pre-auth flood
// of connections cannot reach the console: one over the cap is answered
// 503 + Retry-After.
func TestReplayerConnectionCap(t *testing.T) {
	t.Parallel()
	cfg, _ := lifecycleConfig(t)
	cfg.Ingress.MaxConnections = 2
	a := startApp(t, cfg, intake.Options{Roles: intake.Roles{Replayer: true}})
	for range 2 {
		c, err := net.Dial("tcp", a.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + a.Addr().String() + "/ui/")
	if err != nil {
		t.Fatalf("over the connection cap: %v, want an answer", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("GET /ui/ over the connection cap: %d Retry-After %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
