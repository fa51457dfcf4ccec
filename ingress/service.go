package ingress

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
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
	rejects        rejectLog // rate-limits the "webhook rejected" lines
	refusals       refusals  // counts them for the overview (Run)
	now            func() time.Time
	// envelopeKey signs each message's envelope (envelope.keys[0]); nil:
	// not signed.
	envelopeKey *envelope.Signer

	clients  *clientLimiter // nil: no per-address limit
	recent   *recentDeliveries
	addrs    clientAddrs
	bodies   *bodyBudget
	maxDepth int
	tracer   trace.Tracer // nil: tracing off (Options.TracerProvider)
}

type integration struct {
	config.Integration
	verifier provider.Verifier
	splitter *provider.Splitter // nil: one delivery, one event
	// handshaker answers GET /webhooks/{name} (okta, dropbox) or Graph's
	// POST with ?validationToken (graph); nil: none.
	handshaker *provider.Handshaker
	limiter    *rate.Limiter // nil: no rate limit
	// copies is the rate limit of copies under fresh ids of a body just
	// published (s.recent), beside limiter so they never spend a genuine
	// sender's; nil: no rate limit.
	copies *rate.Limiter
	// unsignedID: the event id is not signed, so a body under another id
	// is a copy (GuardsReplays: replay_guard, else the provider's default).
	unsignedID bool
	// ack is the body the sender expects in the 200 to a stored delivery
	// (Adyen's "[accepted]", provider.Acknowledgement); nil: Intake's JSON.
	ack []byte
	m   integrationMetrics
}

// integrationMetrics are an integration's series on the accepted path,
// looked up once: a label lookup hashes its values on every call.
type integrationMetrics struct {
	received, verified, accepted prometheus.Counter
	secretMatched                []prometheus.Counter // by secret index
	publishLatency, latencyOK    prometheus.Observer
}

func newIntegrationMetrics(m *telemetry.Metrics, in config.Integration) integrationMetrics {
	im := integrationMetrics{
		received:       m.Received.WithLabelValues(in.Name),
		verified:       m.Verified.WithLabelValues(in.Name),
		accepted:       m.Accepted.WithLabelValues(in.Name),
		publishLatency: m.PublishLatency.WithLabelValues(in.Name),
		latencyOK:      m.RequestLatency.WithLabelValues(in.Name, strconv.Itoa(http.StatusOK)),
	}
	for i := range in.Secrets {
		im.secretMatched = append(im.secretMatched, m.SecretMatched.WithLabelValues(in.Name, strconv.Itoa(i)))
	}
	return im
}

// Options configure New.
type Options struct {
	// Config is the whole configuration: ingress reads its integrations, the
	// ingress section and nats.publish_timeout. Required.
	Config *config.Config
	// JS publishes to INTAKE_IN and INTAKE_RECEIPTS. Required.
	JS jetstream.JetStream
	// Metrics defaults to a private registry; Log to discarding.
	Metrics *telemetry.Metrics
	Log     *slog.Logger
	// TracerProvider traces each webhook request: a request span
	// (intake.ingress.request) with a child for the signature check
	// (intake.ingress.verify) and one for the publish (intake.ingress.publish),
	// whose context travels to the processor in the message's traceparent.
	// nil (the default) is tracing off: no span, no header, no allocation.
	TracerProvider trace.TracerProvider
}

// New builds the service from o.Config: unset fields get config's defaults
// (config.Config.WithDefaults, as config.Load applies them) and the result is
// validated, so a hand-built config behaves like a loaded one and a bad value
// is an error naming its field. A body limit left at its default is lowered
// to fit the NATS server's max_payload (logged); one the configuration sets
// that does not fit is ErrPayloadTooSmall. The config itself is not modified.
func New(o Options) (*Service, error) {
	cfg, js, m, log := o.Config, o.JS, o.Metrics, o.Log
	if cfg == nil || js == nil {
		return nil, errors.New("ingress: Options.Config and Options.JS are required")
	}
	c := cfg.WithDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("ingress: %w", err)
	}
	if m == nil {
		m = telemetry.NewMetrics()
	}
	if log == nil {
		log = telemetry.Discard()
	}
	s := &Service{
		integrations:   make(map[string]*integration, len(c.Integrations)),
		js:             js,
		publishTimeout: c.NATS.PublishTimeout,
		instance:       c.Ingress.Instance,
		metrics:        m,
		log:            log,
		now:            time.Now,
		clients:        newClientLimiter(c.Ingress.ClientRateLimit.PerSecond, c.Ingress.ClientRateLimit.Burst, c.Ingress.ClientRateLimit.MaxClients),
		recent:         newRecentDeliveries(c.NATS.Stream.DuplicateWindow),
		bodies:         newBodyBudget(c.Ingress.MaxInflightBodyBytes),
		maxDepth:       c.Ingress.MaxJSONDepth,
	}
	if len(c.Envelope.Keys) > 0 {
		s.envelopeKey = envelope.NewSigner([]byte(c.Envelope.Keys[0])) // the first signs; all verify
	}
	s.tracer = telemetry.Tracer(o.TracerProvider)
	trusted, err := c.Ingress.TrustedPrefixes()
	if err != nil {
		return nil, fmt.Errorf("ingress: ingress.trusted_proxies: %w", err)
	}
	s.addrs = clientAddrs{trusted: trusted, header: c.Ingress.ClientIPHeader}
	if s.clients != nil && len(trusted) == 0 {
		s.clients.peers = &sharedPeer{private: isPrivatePeer, log: log}
	}
	// The server's max_payload is known once connected: a body the limit
	// admits must fit it, or it would be answered 503 on every retry. A
	// default limit is sized to fit; c.Integrations is New's own copy.
	maxPayload := js.Conn().MaxPayload()
	fitDefaultLimits(c.Integrations, maxPayload, log)
	if err := checkPayload(maxPayload, c.Integrations); err != nil {
		return nil, fmt.Errorf("ingress: %w", err)
	}
	for _, in := range c.Integrations {
		v, err := provider.New(in.Config)
		if err != nil {
			return nil, fmt.Errorf("ingress: integration %s: %w", in.Name, err)
		}
		if alg := provider.WeakAlgorithm(in.Config); alg != "" {
			// Opted into per integration; said once at start, and kept
			// visible as a gauge for as long as it is configured.
			log.Warn("integration verifies with a weak hash; move it to sha256 when the sender offers it",
				"integration", in.Name, "provider", in.Provider, "algorithm", alg)
			m.WeakAlgorithm.WithLabelValues(in.Name, alg).Set(1)
		}
		sp, err := provider.NewSplitter(in.Config)
		if err != nil {
			return nil, fmt.Errorf("ingress: integration %s: %w", in.Name, err)
		}
		hs, err := provider.NewHandshaker(in.Config)
		if err != nil {
			return nil, fmt.Errorf("ingress: integration %s: %w", in.Name, err)
		}
		it := &integration{Integration: in, verifier: v, splitter: sp, handshaker: hs, unsignedID: in.GuardsReplays(), m: newIntegrationMetrics(m, in)}
		if ack := provider.Acknowledgement(in.Config); ack != "" {
			it.ack = []byte(ack)
		}
		if rl := in.RateLimit; rl.PerSecond > 0 {
			it.limiter = rate.NewLimiter(rate.Limit(rl.PerSecond), rl.Burst)
			it.copies = rate.NewLimiter(rate.Limit(rl.PerSecond), rl.Burst)
		}
		s.integrations[in.Name] = it
	}
	return s, nil
}

// PublishTimeout is the wait for a PubAck in force (nats.publish_timeout,
// defaults filled).
func (s *Service) PublishTimeout() time.Duration { return s.publishTimeout }

// Instance is this pod's name in delivery receipts (ingress.instance,
// defaults filled).
func (s *Service) Instance() string { return s.instance }

// Integration is the named integration's configuration in force, defaults
// filled.
func (s *Service) Integration(name string) (config.Integration, bool) {
	it, ok := s.integrations[name]
	if !ok {
		return config.Integration{}, false
	}
	return it.Integration, true
}

// Mount adds the webhook route to r.
func (s *Service) Mount(r chi.Router) {
	r.Post("/webhooks/{integration}", s.handleWebhook)
	for _, in := range s.integrations {
		if in.handshaker != nil && in.handshaker.Method() == http.MethodGet {
			// Only where a sender checks the endpoint with a GET; other
			// integrations answer GET 405 as before.
			r.Get("/webhooks/{integration}", s.handleHandshakeGET)
			break
		}
	}
}

// Handler is a router with only the webhook route (standalone ingress adds
// health and metrics next to it).
func (s *Service) Handler() http.Handler {
	r := chi.NewRouter()
	s.Mount(r)
	return r
}
