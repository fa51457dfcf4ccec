package ingress_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/ingress"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/telemetry"
)

// recordLog keeps the attributes of every record logged through it.
type recordLog struct {
	mu    sync.Mutex
	lines [][]slog.Attr
}

func (l *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *recordLog) WithGroup(string) slog.Handler            { return l }
func (l *recordLog) Handle(_ context.Context, r slog.Record) error {
	var attrs []slog.Attr
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, attrs)
	return nil
}

func (l *recordLog) keys() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][]string
	for _, line := range l.lines {
		var ks []string
		for _, a := range line {
			ks = append(ks, a.Key)
		}
		out = append(out, ks)
	}
	return out
}

// badSignatureService is a service with one GitHub integration, logging to
// log, and a request it rejects for its signature.
func badSignatureService(t *testing.T, log *slog.Logger, tp trace.TracerProvider) (*ingress.Service, func() *http.Request) {
	t.Helper()
	cfg := testrig.ParseConfig(t, `
integrations:
  - {name: gh, provider: github, tenant: acme, secrets: ["github-secret"]}
`)
	s, err := ingress.New(ingress.Options{Config: cfg, JS: testrig.NATS(t, cfg.NATS.Stream).JS, Metrics: telemetry.NewMetrics(), Log: log, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	return s, func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/gh", strings.NewReader(`{"zen":"x"}`))
		r.Header.Set("X-GitHub-Event", "ping")
		r.Header.Set("X-GitHub-Delivery", "d-1")
		r.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
		// A provider's own trace context: never joined.
		r.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		return r
	}
}

// With tracing off a rejection logs exactly its own attributes, as before
// tracing existed: an extra argument (an always-passed trace attribute,
// even an empty one slog drops) is boxed into ...any, an allocation per
// rejected request. Traced, too: a rejection has no span (issue 30), so
// no trace id.
func TestRejectionLogLineWithoutTracing(t *testing.T) {
	want := []string{"integration", "reason", "status", "remote"}
	for _, traced := range []bool{false, true} {
		rec := &recordLog{}
		var tp trace.TracerProvider
		if traced {
			sdk := sdktrace.NewTracerProvider()
			t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
			tp = sdk
		}
		s, req := badSignatureService(t, slog.New(rec), tp)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req())
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("traced %v: status %d, want 401 (bad signature)", traced, w.Code)
		}
		if got := rec.keys(); len(got) != 1 || !slices.Equal(got[0], want) {
			t.Errorf("traced %v: log lines with keys %q, want one with %q", traced, got, want)
		}
	}
}

// A provider's traceparent on the webhook request is ignored: the request
// span is a new root of Intake's own trace.
func TestProviderTraceparentIgnored(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s, req := badSignatureService(t, telemetry.Discard(), tp)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, signed(req()))
	if w.Code != http.StatusOK {
		t.Fatalf("signed delivery: %d %s", w.Code, w.Body)
	}
	var found bool
	for _, sp := range rec.Ended() {
		if sp.Name() != "intake.ingress.request" {
			continue
		}
		found = true
		if sp.Parent().IsValid() || sp.SpanContext().TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736" || len(sp.Links()) != 0 {
			t.Errorf("request span: parent %v, trace %s, links %v; want a new root", sp.Parent(), sp.SpanContext().TraceID(), sp.Links())
		}
	}
	if !found {
		t.Fatal("no request span ended")
	}
}

// signed is r with a valid GitHub signature over its body (secret
// "github-secret", as badSignatureService's integration).
func signed(r *http.Request) *http.Request {
	body, _ := io.ReadAll(r.Body)
	mac := hmac.New(sha256.New, []byte("github-secret"))
	mac.Write(body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	return r
}

// Issue 30: ingress traced every rejected request, so an internet flood of
// bad signatures filled the exporter with spans of nothing. A rejection
// now starts no span; a delivery that reaches its publish gets the request
// span from its arrival, with its verify and publish spans inside.
func TestOnlyPublishedDeliveriesAreTraced(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s, req := badSignatureService(t, telemetry.Discard(), tp)
	for range 30 { // within the address's burst (40): all 401
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req())
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("bad signature: %d, want 401", w.Code)
		}
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans for 30 rejected requests, want none", n)
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, signed(req()))
	if w.Code != http.StatusOK {
		t.Fatalf("signed delivery: %d %s", w.Code, w.Body)
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		byName[sp.Name()] = sp
	}
	rq, v, p := byName["intake.ingress.request"], byName["intake.ingress.verify"], byName["intake.ingress.publish"]
	if rq == nil || v == nil || p == nil || len(rec.Ended()) != 3 {
		t.Fatalf("spans %v, want request, verify and publish", byName)
	}
	for _, child := range []sdktrace.ReadOnlySpan{v, p} {
		if child.Parent().SpanID() != rq.SpanContext().SpanID() || child.StartTime().Before(rq.StartTime()) || child.EndTime().After(rq.EndTime()) {
			t.Errorf("%s: parent %s, %s–%s; want inside the request span %s, %s–%s", child.Name(), child.Parent().SpanID(),
				child.StartTime(), child.EndTime(), rq.SpanContext().SpanID(), rq.StartTime(), rq.EndTime())
		}
	}
	if !v.EndTime().Before(p.StartTime()) && !v.EndTime().Equal(p.StartTime()) {
		t.Errorf("verify ends %s after the publish starts %s", v.EndTime(), p.StartTime())
	}
}
