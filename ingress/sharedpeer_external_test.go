package ingress_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intakehq/intake/ingress"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/internal/httpserver"
)

// warnings is a slog handler's output of WARN and above, safe for the
// server's goroutines.
type warnings struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *warnings) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *warnings) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestSharedPrivatePeerIsWarnedOnce: an ingress that trusts no proxy, whose
// requests all come from one private address (a proxy's, as behind the
// chart's Ingress controller), logs one warning naming the address and the
// keys to set, however many requests follow and whatever X-Forwarded-For
// they carry (an untrusted peer's is ignored). The test sends from
// loopback, which the production rule leaves out (a sidecar, a laptop), so
// the watch is told to count it; without that, and with the proxy trusted,
// there is no warning.
func TestSharedPrivatePeerIsWarnedOnce(t *testing.T) {
	for _, tt := range []struct {
		name     string
		ingress  string
		loopback bool
		warn     bool
	}{
		{"no proxy trusted, one private peer", "", true, true},
		{"no proxy trusted, loopback under the production rule", "", false, false},
		{"the proxy trusted", "ingress: {trusted_proxies: [127.0.0.1], client_ip_header: X-Forwarded-For}\n", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testrig.ParseConfig(t, tt.ingress+fmt.Sprintf(testIngressY, whpk))
			js := testrig.NATS(t, cfg.NATS.Stream).JS
			logs := &warnings{}
			svc, err := ingress.New(ingress.Options{Config: cfg, JS: js,
				Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				t.Fatal(err)
			}
			if tt.loopback {
				ingress.CountLoopbackAsPrivate(svc)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := httpserver.New(ln.Addr().String(), svc.Handler(), cfg.Ingress.Timeouts())
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
			})
			client := &http.Client{Timeout: 10 * time.Second}
			t.Cleanup(client.CloseIdleConnections)
			for i := range 250 { // past the watch's 100, and past the bucket's burst (429s count too)
				req, err := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/webhooks/std", strings.NewReader(`{}`))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i%250))
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusTooManyRequests {
					t.Fatalf("unsigned request %d: %d, want 401 or 429", i, resp.StatusCode)
				}
			}
			got := logs.String()
			n := strings.Count(got, "level=WARN")
			if !tt.warn {
				if n != 0 {
					t.Fatalf("%d warnings, want none:\n%s", n, got)
				}
				return
			}
			if n != 1 {
				t.Fatalf("%d warnings, want one:\n%s", n, got)
			}
			for _, want := range []string{"addr=127.0.0.1", "ingress.trusted_proxies", "ingress.client_ip_header"} {
				if !strings.Contains(got, want) {
					t.Errorf("warning %q does not name %q", got, want)
				}
			}
		})
	}
}
