package ingress

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/telemetry"
)

// Service receives webhooks and publishes them to INTAKE_IN.
type Service struct {
	integrations   map[string]*integration
	js             jetstream.JetStream
	publishTimeout time.Duration
	instance       string
	metrics        *telemetry.Metrics
	log            *slog.Logger
	now            func() time.Time
}

type integration struct {
	config.Integration
	verifier provider.Verifier
	limiter  *rate.Limiter // nil: no rate limit
}

// New builds the service from a validated configuration.
func New(cfg *config.Config, js jetstream.JetStream, m *telemetry.Metrics, log *slog.Logger) (*Service, error) {
	s := &Service{
		integrations:   make(map[string]*integration, len(cfg.Integrations)),
		js:             js,
		publishTimeout: cfg.NATS.PublishTimeout,
		instance:       cfg.Ingress.Instance,
		metrics:        m,
		log:            log,
		now:            time.Now,
	}
	for _, in := range cfg.Integrations {
		v, err := provider.New(in.Config)
		if err != nil {
			return nil, fmt.Errorf("ingress: integration %s: %w", in.Name, err)
		}
		it := &integration{Integration: in, verifier: v}
		if rl := in.RateLimit; rl.PerSecond > 0 {
			it.limiter = rate.NewLimiter(rate.Limit(rl.PerSecond), max(rl.Burst, 1))
		}
		s.integrations[in.Name] = it
	}
	return s, nil
}

// Mount adds the webhook route to r.
func (s *Service) Mount(r chi.Router) {
	r.Post("/webhooks/{integration}", s.handleWebhook)
}

// Handler is a router with only the webhook route (standalone ingress adds
// health and metrics next to it).
func (s *Service) Handler() http.Handler {
	r := chi.NewRouter()
	s.Mount(r)
	return r
}

// Server wraps h with the configured timeouts, so slow clients cannot hold
// connections open (slowloris) whatever the body limit.
func Server(addr string, h http.Handler, c config.Ingress) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}
