package testrig

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/telemetry"
)

// appStartTimeout bounds app.Run's start: generous, as parallel test
// binaries share two cores.
const appStartTimeout = time.Minute

// App is app.Run running in a goroutine of the test.
type App struct {
	// URL is the HTTP base: webhooks, /api/v1, health, and /metrics unless
	// http.internal_addr is set; https:// with http.tls.
	URL     string
	Config  *config.Config
	Metrics *telemetry.Metrics
}

// StartApp runs app.Run(cfg, o) until the test ends, then stops it and
// fails the test if it returned an error. It returns once the app serves
// HTTP. o.HTTPAddr defaults to a free loopback port; o.Metrics, when nil,
// is a fresh registry of o.Roles' series (app.NewMetrics, as app.Run
// builds it) in App.Metrics, so tests can read it.
func StartApp(t testing.TB, cfg *config.Config, o intake.Options) *App {
	t.Helper()
	if o.HTTPAddr == "" {
		o.HTTPAddr = "127.0.0.1:0"
	}
	if o.Metrics == nil {
		o.Metrics = intake.NewMetrics(o.Roles)
	}
	addrc := make(chan net.Addr, 1)
	listening := o.Listening
	o.Listening = func(a net.Addr) {
		if listening != nil {
			listening(a)
		}
		addrc <- a
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- intake.Run(ctx, cfg, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("testrig: app.Run: %v", err)
		}
	})
	select {
	case a := <-addrc:
		scheme := "http://"
		if cfg.HTTP.TLS.Enabled() {
			scheme = "https://"
		}
		return &App{URL: scheme + a.String(), Config: cfg, Metrics: o.Metrics}
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("testrig: app.Run ended at start: %v", err)
	case <-time.After(appStartTimeout):
		t.Fatalf("testrig: app did not start within %s", appStartTimeout)
	}
	return nil
}
