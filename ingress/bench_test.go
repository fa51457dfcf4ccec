package ingress_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intakehq/intake/ingress"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/telemetry"
)

// BenchmarkHandler is ingress's handler without the network in front of
// it — signature check, payload hash, the JetStream request and its PubAck
// from an embedded nats-server, the answer — against a bare handler that
// reads the same signed request and answers (the limit, in the same run).
// Its ns/op is the handler's cost per request on this machine with the
// nats-server storing each message in the same process; the network and
// net/http's connection handling, which both pay alike, are left out, so
// the ratio is stricter than intake bench's ingress / bare HTTP.
//
//	go test -run '^$' -bench Handler -benchtime 20000x -count 5 ./ingress/
func BenchmarkHandler(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("bare/%dKiB", size>>10), func(b *testing.B) {
			benchHandler(b, size, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"status":"accepted"}` + "\n"))
			}))
		})
		b.Run(fmt.Sprintf("ingress/%dKiB", size>>10), func(b *testing.B) {
			benchHandler(b, size, nil)
		})
	}
}

const benchConfig = `
integrations:
  - {name: std, provider: standard, tenant: acme, secrets: ["` + whsecNew + `"]}
`

// benchHandler sends b.N Standard Webhooks deliveries, each with its own
// event id and signature (made before the timer starts), 32 at a time.
// A nil h is ingress with a fresh stream.
func benchHandler(b *testing.B, size int, h http.Handler) {
	cfg, err := config.Parse([]byte(benchConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	if h == nil {
		js := streamClient(b, testenv.NATS(b), cfg)
		svc, err := ingress.New(ingress.Options{Config: cfg, JS: js, Metrics: telemetry.NewMetrics(), Log: telemetry.Discard()})
		if err != nil {
			b.Fatal(err)
		}
		h = svc.Handler()
	}
	in, _ := cfg.Integration("std")
	body := bytes.Repeat([]byte("x"), size)
	copy(body, `{"type":"bench.event","data":"`)
	body[len(body)-2], body[len(body)-1] = '"', '}'
	now := time.Now()
	headers := make([]http.Header, b.N)
	for i := range headers {
		hd, err := provider.SignMessage(in.Config, 0, provider.Message{ID: fmt.Sprintf("evt_%d_%d", now.UnixNano(), i), Body: body, Time: now})
		if err != nil {
			b.Fatal(err)
		}
		headers[i] = hd
	}
	var next, failed atomic.Int64
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.SetParallelism(16)
	cpu0 := testenv.CPUTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest(http.MethodPost, "/webhooks/std", bytes.NewReader(body))
			r.Header = headers[next.Add(1)-1]
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				failed.Add(1)
			}
		}
	})
	b.StopTimer()
	// The process's CPU per request (handler, client and nats-server): it
	// moves less with the host than ns/op does.
	b.ReportMetric(float64((testenv.CPUTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d requests not answered 200", f, b.N)
	}
}
