package intake

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/dispatcher"
	"github.com/intakehq/intake/ingress"
	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/console"
)

// Roles selects what one process runs.
type Roles struct {
	Ingress   bool
	Processor bool // with the outbox relay and the receipt folder
	Replayer  bool // the operator API (/api/v1), the console and the replay engine; its config is the api section
	// Dispatcher pushes processed events from INTAKE_OUT to the config's
	// HTTP destinations (docs/destinations.md).
	Dispatcher bool
}

// Options configure an App.
type Options struct {
	Roles Roles
	// HTTPAddr is the public listener: webhooks, /api/v1 and health, over
	// HTTPS with http.tls, and /metrics and /debug too unless
	// http.internal_addr gives them a listener of their own.
	HTTPAddr string
	// Handler overrides the processor's handler (library users); defaults to
	// the file's SQL handlers (handlers:), else Forward. Set together with
	// handlers: in the file, the start is refused.
	Handler processor.Handler
	// Middleware wraps the handler chosen (Handler, the SQL handlers or
	// Forward), first outermost: `intake dev`'s demo failures.
	Middleware []processor.Middleware
	// RestartGrace is how long the processor and the receipt folder keep
	// trying to get a lost consumer back before the role, and with it the
	// App, fails. Defaults to processor.DefaultRestartGrace (30s).
	RestartGrace time.Duration
	// Listening, when set, is called with the bound public address once
	// serving (App.InternalAddr has the internal one).
	Listening func(net.Addr)
	Log       *slog.Logger // defaults to discarding
	// Metrics defaults to NewMetrics(Roles): the selected roles' series
	// only. New adds the NATS connection's and (processor, API) the
	// Postgres pool's collectors to its registry.
	Metrics *telemetry.Metrics
	// TracerProvider traces the roles (docs/tracing.md); nil (the default)
	// is tracing off. The caller owns it: build it with
	// otlp.New and shut it down after Stop, so the last spans
	// are flushed.
	TracerProvider trace.TracerProvider
}

// NewMetrics builds the metrics of the roles r selects (telemetry.NewMetricsFor).
func NewMetrics(r Roles) *telemetry.Metrics {
	return telemetry.NewMetricsFor(telemetry.Roles{Ingress: r.Ingress, Processor: r.Processor, Replayer: r.Replayer, Dispatcher: r.Dispatcher})
}

const (
	// startTimeout bounds New's waiting for JetStream, the streams and Postgres.
	startTimeout = 30 * time.Second
	// ShutdownTimeout bounds Run's graceful shutdown (in-flight requests).
	ShutdownTimeout = 30 * time.Second
)

// startBackoff spaces New's attempts to reach a NATS server or a Postgres
// that is restarting.
var startBackoff = backoff.Backoff{Min: 250 * time.Millisecond, Max: 2 * time.Second}

// App is the selected roles, built and wired, in three steps: New connects
// and builds everything (nothing listens or runs yet, so a construction
// error leaves nothing behind), Start listens and runs the roles, Stop shuts
// them down in order. A role that cannot run any more fails the App: /readyz
// answers 503 with the reason, Failed is closed, and Stop returns the reason.
type App struct {
	o      Options
	log    *slog.Logger
	nc     *nats.Conn
	st     *store.Store // nil unless the processor or API runs
	srv    *http.Server // the public listener's
	isrv   *http.Server // the internal listener's; nil unless http.internal_addr is set
	health health

	ing    *ingress.Service
	proc   *processor.Processor
	relay  *processor.Relay
	purger *processor.Purger
	folder *processor.ReceiptFolder
	rp     *replayer.Replayer
	disp   *dispatcher.Dispatcher

	maxConns  int          // ingress.max_connections on every role's public listener; 0: no cap
	ln        net.Listener // set by Start
	iln       net.Listener // set by Start with the internal server
	stopWork  context.CancelFunc
	stopRelay context.CancelFunc
	serving   sync.WaitGroup // the HTTP servers
	working   sync.WaitGroup // ingress's refusal counts, processor, receipt folder, replayer, dispatcher
	relaying  sync.WaitGroup // the outbox relay, stopped after the processor drained

	failed   chan struct{}
	failOnce sync.Once
	mu       sync.Mutex
	err      error // the first role failure
	stopOnce sync.Once
	stopped  bool // set by Stop; a stopped App does not start again

	collectors []prometheus.Collector // registered by New on o.Metrics.Registry, removed by close
}

// Run is New, Start, wait for ctx to end or a role to fail, then Stop
// (in-flight requests get ShutdownTimeout; the processor's drain is bounded
// by its ack deadline). It returns nil after a shutdown asked by ctx,
// and the reason when the App could not be built or started or a role
// failed.
func Run(ctx context.Context, cfg *config.Config, o Options) error {
	a, err := New(ctx, cfg, o)
	if err != nil {
		return err
	}
	stop := func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
		defer cancel()
		return a.Stop(sctx)
	}
	if err := a.Start(ctx); err != nil {
		_ = stop()
		return err
	}
	select {
	case <-ctx.Done():
	case <-a.Failed():
	}
	return stop()
}

// New connects to NATS and (for the processor and API) Postgres, waits for
// JetStream and checks the streams, checks the schema is migrated, and
// builds the selected services and the HTTP router. Nothing listens and no
// role runs until Start. On error everything New opened is closed again.
func New(ctx context.Context, cfg *config.Config, o Options) (_ *App, err error) {
	o = o.withDefaults()
	// A program embedding Intake may hand-build its Config: the streams, the
	// pool and every service then see the documented defaults, not zeros.
	withDefaults := cfg.WithDefaults()
	if err := withDefaults.Validate(); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	cfg = &withDefaults
	if need := o.Roles.Secrets(); !cfg.Holds(need) {
		return nil, fmt.Errorf("app: the config was loaded without secrets these roles need: load it with config.LoadFor(path, %s)", need)
	}
	if cfg.NATS.URL == "" {
		return nil, errors.New("nats.url (or INTAKE_NATS_URL) is required outside `intake dev`")
	}
	a := &App{o: o, log: o.Log, failed: make(chan struct{})}
	defer func() {
		if err != nil {
			a.close()
		}
	}()

	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	js, err := a.connect(startCtx, cfg)
	if err != nil {
		return nil, err
	}
	r, err := a.routers(cfg)
	if err != nil {
		return nil, err
	}
	if o.Roles.Ingress {
		if err := a.buildIngress(cfg, js, r); err != nil {
			return nil, err
		}
	}
	if o.Roles.Replayer {
		if err := a.buildReplayer(cfg, js, r); err != nil {
			return nil, err
		}
	}
	if o.Roles.Processor {
		if err := a.buildProcessor(startCtx, cfg, js); err != nil {
			return nil, err
		}
	}
	if o.Roles.Dispatcher {
		if a.disp, err = dispatcher.New(dispatcher.Options{Destinations: cfg.Destinations, Store: a.st, JS: js,
			Metrics: o.Metrics, Log: a.log}); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Secrets are the config's secrets the roles r use: ingress the
// integrations' (it verifies deliveries) and the envelope keys (it signs),
// the processor the envelope keys (it verifies), the replayer the API
// tokens, the dispatcher the destinations' secrets (it signs). A role's
// process loads only these (config.LoadFor).
func (r Roles) Secrets() config.Secrets {
	var s config.Secrets
	if r.Ingress {
		s |= config.WebhookSecrets | config.EnvelopeKeys
	}
	if r.Processor {
		s |= config.EnvelopeKeys
	}
	if r.Replayer {
		s |= config.APITokens
	}
	if r.Dispatcher {
		s |= config.DestinationSecrets
	}
	return s
}

func (o Options) withDefaults() Options {
	if o.Log == nil {
		o.Log = telemetry.Discard()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(o.Roles)
	}
	if o.RestartGrace <= 0 {
		o.RestartGrace = processor.DefaultRestartGrace
	}
	return o
}

// connect reaches NATS (and checks its version and the streams the roles
// use) and, for the processor and the replayer, Postgres.
func (a *App) connect(ctx context.Context, cfg *config.Config) (jetstream.JetStream, error) {
	var err error
	// Ingress connects without a reconnect buffer: during an outage it must
	// answer 503 at once, never "accepted" for a write it cannot confirm.
	a.nc, err = connectNATS(ctx, cfg.NATS, a.o.Roles.natsRole(), !a.o.Roles.Ingress, a.log)
	if err != nil {
		return nil, err
	}
	a.register(telemetry.NewNATSCollector(a.nc))
	js, err := jetstream.New(a.nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if err := stream.WaitReady(ctx, js); err != nil {
		return nil, err
	}
	if err := stream.CheckServerVersion(a.nc.ConnectedServerVersion()); err != nil {
		return nil, err
	}
	// The roles check the streams; `intake migrate` creates them (as admin).
	if err := stream.Check(ctx, js, cfg.NATS.Stream, a.log, a.o.Roles.streams()...); err != nil {
		return nil, err
	}
	if a.o.Roles.Processor || a.o.Roles.Replayer || a.o.Roles.Dispatcher {
		if a.st, err = openStore(ctx, cfg.Postgres, a.log); err != nil {
			return nil, err
		}
		a.register(store.NewPoolCollector(a.st.Pool()))
		a.warnConnectionBudget(ctx, cfg)
		if a.o.Roles.Replayer {
			a.warnTransactionPooler(ctx)
		}
	}
	return js, nil
}

// buildIngress mounts the webhook route.
func (a *App) buildIngress(cfg *config.Config, js jetstream.JetStream, r chi.Router) error {
	svc, err := ingress.New(ingress.Options{Config: cfg, JS: js, Metrics: a.o.Metrics, Log: a.log, TracerProvider: a.o.TracerProvider})
	if err != nil {
		return err
	}
	svc.Mount(r)
	a.ing = svc
	return nil
}

// buildReplayer mounts the operator API and the console. A shard's
// replayer (processor.shard) answers for the shard's integrations and
// reads its durable: the same config as its processors.
func (a *App) buildReplayer(cfg *config.Config, js jetstream.JetStream, r chi.Router) error {
	ro := replayerOptions(cfg)
	ro.Store, ro.JS, ro.Registry = a.st, js, a.o.Metrics.Registry
	ro.Log, ro.TracerProvider = a.log, a.o.TracerProvider
	var err error
	if a.rp, err = replayer.New(ro); err != nil {
		return err
	}
	a.rp.Mount(r)
	return console.Mount(r, a.rp)
}

// buildProcessor builds the processor with its outbox relay (whose
// partitions it prepares), the purger and the receipt folder.
func (a *App) buildProcessor(ctx context.Context, cfg *config.Config, js jetstream.JetStream) error {
	o := a.o
	a.warnOverlappingDurables(ctx, js, cfg)
	h := o.Handler
	if len(cfg.Handlers) > 0 {
		// Two handlers for one event would be a choice made silently:
		// an embedder that wants both routes the SQL ones itself
		// (processor.SQLRouter) inside its own Router.
		if h != nil {
			return errors.New("config: handlers: this program runs a Go handler of its own (Options.Handler); " +
				"remove handlers: from the file, or build them into that handler with processor.SQLRouter")
		}
		r, err := processor.SQLRouter(ctx, a.st.Pool(), cfg.Handlers)
		if err != nil {
			return fmt.Errorf("config: handlers: %w", err)
		}
		h = r
	}
	if len(o.Middleware) > 0 {
		if h == nil {
			h = processor.Forward()
		}
		h = processor.Chain(h, o.Middleware...)
	}
	var err error
	// A forwarded payload stays in INTAKE_IN, not copied into its outbox
	// row, unless the stream keeps messages for less time than the outbox
	// keeps rows (a redelivery from an older row would find none).
	streamCfg := cfg.NATS.Stream.WithDefaults()
	copyPayload := streamCfg.MaxAge < cfg.Outbox.WithDefaults(streamCfg.DuplicateWindow).Retention
	a.proc, err = processor.New(processor.Options{Store: a.st, JS: js, Config: cfg.Processor, Integrations: cfg.Integrations, Envelope: cfg.Envelope, Handler: h,
		OutboxPayloadCopy: copyPayload, Metrics: o.Metrics, Log: a.log, TracerProvider: o.TracerProvider})
	if err != nil {
		return err
	}
	if a.relay, err = processor.NewRelay(processor.RelayOptions{Store: a.st, JS: js, Config: cfg.Outbox,
		DuplicateWindow: cfg.NATS.Stream.DuplicateWindow, Metrics: o.Metrics, Log: a.log, TracerProvider: o.TracerProvider}); err != nil {
		return err
	}
	if err := a.relay.PreparePartitions(ctx); err != nil {
		return err
	}
	if a.purger, err = processor.NewPurger(processor.PurgerOptions{Store: a.st, Config: cfg, Metrics: o.Metrics, Log: a.log}); err != nil {
		return err
	}
	a.folder, err = processor.NewReceiptFolder(processor.ReceiptFolderOptions{Store: a.st, JS: js,
		Config: cfg.Processor, Integrations: cfg.Integrations, Metrics: o.Metrics, Log: a.log})
	return err
}

// connectNATS dials NATS. A role started while its NATS server cannot be
// reached yet (a container started beside it, a server restarting, a DNS
// name not published yet, a dial timing out) waits for one within ctx, the
// start budget, as openStore waits for Postgres; a server that answers and
// refuses (credentials, TLS) or a file that cannot be read fails at once.
func connectNATS(ctx context.Context, c config.NATS, role string, bufferOnReconnect bool, log *slog.Logger) (*nats.Conn, error) {
	if _, err := stream.Options(c, role); err != nil { // a bad nkey seed: no dial can mend it
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		nc, err := stream.Connect(c, role, bufferOnReconnect, log)
		if err == nil || ctx.Err() != nil || natsRefused(err) {
			return nc, err
		}
		if attempt == 0 {
			log.Warn("waiting for nats", "err", err)
		}
		if backoff.Sleep(ctx, startBackoff.Next(attempt)) != nil {
			return nil, err
		}
	}
}

// natsRefused reports whether err, from dialing NATS, is one that waiting
// will not mend: the server refused the credentials or the TLS handshake
// failed, or a credentials, CA or certificate file cannot be read.
// Everything else (refused or timed out dials, unresolvable names,
// connections reset) is retried within the start budget.
func natsRefused(err error) bool {
	for _, refusal := range []error{nats.ErrAuthorization, nats.ErrAuthExpired, nats.ErrAuthRevoked,
		nats.ErrAccountAuthExpired, nats.ErrTLS, nats.ErrSecureConnRequired, nats.ErrSecureConnWanted,
		nats.ErrNkeysNotSupported} {
		if errors.Is(err, refusal) {
			return true
		}
	}
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verification     *tls.CertificateVerificationError
		alert            tls.AlertError
		record           tls.RecordHeaderError
		path             *fs.PathError
	)
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verification) || errors.As(err, &alert) || errors.As(err, &record) || errors.As(err, &path)
}

// openStore opens the pool and checks the schema. A role started while
// Postgres restarts waits for it (within ctx, the start budget) instead of
// exiting: one restart should not become a crash loop. A refusal (bad
// credentials, unknown database) fails at once.
func openStore(ctx context.Context, c config.Postgres, log *slog.Logger) (*store.Store, error) {
	if c.URL == "" {
		return nil, errors.New("postgres.url (or DATABASE_URL) is required")
	}
	for attempt := 0; ; attempt++ {
		st, err := store.Open(ctx, c.URL, c.MaxConns)
		if err == nil {
			if err := store.CheckMigrated(ctx, st); err != nil {
				st.Close()
				return nil, err
			}
			return st, nil
		}
		if ctx.Err() != nil || !store.Unreachable(err) {
			return nil, err
		}
		if attempt == 0 {
			log.Warn("waiting for postgres", "err", err)
		}
		if backoff.Sleep(ctx, startBackoff.Next(attempt)) != nil {
			return nil, err
		}
	}
}

// Start listens on HTTPAddr (and http.internal_addr) and runs the roles.
// ctx bounds the start only and passes its values to the roles; they run
// until Stop (or until one fails: see Failed). If Start fails nothing was started; Stop still closes
// what New opened.
func (a *App) Start(ctx context.Context) error {
	a.mu.Lock()
	stopped := a.stopped
	a.mu.Unlock()
	if stopped {
		return errors.New("app: stopped; build a new one with New")
	}
	if a.ln != nil {
		return errors.New("app: already started")
	}
	ln, iln, err := a.listen()
	if err != nil {
		return err
	}
	a.ln, a.iln = ln, iln
	// Roles keep ctx's values (fault hooks in the harnesses) but not its
	// cancellation: Stop ends them, in order.
	base := context.WithoutCancel(ctx)
	workCtx, stopWork := context.WithCancel(base)
	relayCtx, stopRelay := context.WithCancel(base)
	a.stopWork, a.stopRelay = stopWork, stopRelay

	a.serve()
	if a.ing != nil {
		// Sends the refusal counts; its last flush follows the HTTP server's shutdown.
		a.runRole(&a.working, workCtx, "refusals", a.ing.Run)
	}
	if a.proc != nil {
		a.runRole(&a.working, workCtx, "processor", func(ctx context.Context) error {
			return a.proc.Run(ctx, processor.WithRestartGrace(a.o.RestartGrace), processor.WithHealth(a.health.reporter("processor")))
		})
		a.runRole(&a.working, workCtx, "receipts", func(ctx context.Context) error {
			return a.folder.Run(ctx, processor.WithRestartGrace(a.o.RestartGrace), processor.WithHealth(a.health.reporter("receipts")))
		})
		a.runRole(&a.relaying, relayCtx, "relay", a.relay.Run)
		a.runRole(&a.working, workCtx, "purge", a.purger.Run)
	}
	if a.rp != nil {
		// Publishes new replays and resumes those a stopped replayer left running.
		a.runRole(&a.working, workCtx, "replayer", a.rp.Run)
	}
	if a.disp != nil {
		// Its deliveries in flight end within their timeouts; Stop waits for them.
		a.runRole(&a.working, workCtx, "dispatcher", a.disp.Run)
	}
	if a.o.Listening != nil {
		a.o.Listening(ln.Addr())
	}
	return nil
}

// runRole runs one role on wg. A role ends by itself only when it cannot
// run any more: that fails the App.
func (a *App) runRole(wg *sync.WaitGroup, ctx context.Context, role string, run func(context.Context) error) {
	wg.Go(func() {
		err := run(ctx)
		if err == nil && ctx.Err() == nil {
			err = errors.New("ended before shutdown")
		}
		if err != nil {
			a.fail(role, err)
		}
	})
}

// fail records that a role cannot run any more: /readyz reports it from now
// on, and Failed is closed.
func (a *App) fail(role string, err error) {
	a.log.Error("role cannot run any more; shutting down", "part", role, "err", err)
	a.health.set(role, err)
	err = fmt.Errorf("%s: %w", role, err)
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.mu.Unlock()
	a.failOnce.Do(func() { close(a.failed) })
}

// Failed is closed when a role failed: the App cannot do all its work any
// more. Call Stop, which returns the reason.
func (a *App) Failed() <-chan struct{} { return a.failed }

// Addr is the public address Start bound; nil before Start.
func (a *App) Addr() net.Addr {
	if a.ln == nil {
		return nil
	}
	return a.ln.Addr()
}

// InternalAddr is the address Start bound for http.internal_addr; nil
// before Start and when it is not set.
func (a *App) InternalAddr() net.Addr {
	if a.iln == nil {
		return nil
	}
	return a.iln.Addr()
}

// Stop shuts down in order: stop accepting requests and let those in flight
// get their answer (within ctx; then they are cut), drain the processor (the
// batches it fetched are committed and acked) and stop the receipt folder
// and replayer, then stop the relay, then close the connections. It returns
// the first role failure, if any. Calls after the first do nothing more.
func (a *App) Stop(ctx context.Context) error {
	a.stopOnce.Do(func() {
		a.mu.Lock()
		a.stopped = true
		a.mu.Unlock()
		if a.ln != nil {
			a.log.Info("shutting down")
			a.shutdownHTTP(ctx)
			a.stopWork()
			a.working.Wait()
			a.stopRelay()
			a.relaying.Wait()
		}
		a.close()
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// register adds c to the metrics registry until close. Another App on the
// same registry (a program running two) keeps its own: the first one wins.
func (a *App) register(c prometheus.Collector) {
	if err := a.o.Metrics.Registry.Register(c); err == nil {
		a.collectors = append(a.collectors, c)
	}
}

// close closes the connections New opened.
func (a *App) close() {
	for _, c := range a.collectors {
		a.o.Metrics.Registry.Unregister(c)
	}
	if a.st != nil {
		a.st.Close()
	}
	if a.nc != nil {
		a.nc.Close()
	}
}

// readyzWait bounds each of /readyz's round trips (NATS, Postgres): a peer
// that hangs makes the role not ready within it.
const readyzWait = 2 * time.Second

// readyz answers 200 while NATS is connected and answers, Postgres takes writes (when a
// role uses it: the processor and the replayer write; a standby or a server
// in recovery is not ready) and no role reports a problem; else 503 with the
// reasons.
func (a *App) readyz(w http.ResponseWriter, r *http.Request) {
	var reasons []string
	switch s := a.nc.Status(); {
	case s != nats.CONNECTED:
		reasons = append(reasons, "nats: "+s.String())
	case a.nc.FlushTimeout(readyzWait) != nil:
		// Connected on paper, silent in fact (a partition): the client's
		// pings (stream.PingInterval) notice it within seconds, this
		// round trip at once.
		reasons = append(reasons, "nats: no answer within "+readyzWait.String())
	}
	reasons = append(reasons, a.health.problems()...)
	if a.st != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyzWait)
		defer cancel()
		switch err := a.st.Writable(ctx); {
		case errors.Is(err, store.ErrReadOnly):
			reasons = append(reasons, err.Error())
		case err != nil:
			reasons = append(reasons, "postgres unavailable")
		}
	}
	if len(reasons) > 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		for _, s := range reasons {
			_, _ = fmt.Fprintln(w, s)
		}
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// integrationNames are the names of the configured integrations.
// replayerOptions are the replayer's Options the config file gives: the api
// section, and the shard and its integrations.
func replayerOptions(cfg *config.Config) replayer.Options {
	api := cfg.API
	return replayer.Options{Tokens: api.Tokens,
		DefaultRate: api.Replays.DefaultRate, MaxRate: api.Replays.MaxRate, MaxMatched: api.Replays.MaxMatched,
		ReexecuteApprovalAbove: api.Replays.ReexecuteApprovalAbove,
		MaxRunning:             api.Replays.MaxRunning, ResumeInterval: api.Replays.ResumeInterval,
		PublishTimeout: api.Replays.PublishTimeout, RetryFor: api.Replays.RetryFor,
		ReconcileMaxSpan: api.Reconcile.MaxSpan, ReconcileViewerMaxSpan: api.Reconcile.ViewerMaxSpan,
		MaxReconciles: api.Reconcile.MaxRunning, PayloadSearch: api.PayloadSearch,
		StatsInterval: api.StatsInterval, GapCheckInterval: api.GapCheckInterval,
		RedriveInterval: api.RedriveInterval, RedriveLookback: api.RedriveLookback,
		Shard: cfg.Processor.Shard, Integrations: integrationNames(cfg.Integrations), Destinations: cfg.Destinations}
}

func integrationNames(ins []config.Integration) []string {
	names := make([]string, 0, len(ins))
	for _, in := range ins {
		names = append(names, in.Name)
	}
	return names
}
