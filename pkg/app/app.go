package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/ingress"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
	"github.com/intakehq/intake/replayer"
)

// Roles selects what one process runs.
type Roles struct {
	Ingress   bool
	Processor bool // with the outbox relay
	API       bool // the replayer: operator API (/api/v1) and the replay engine
}

// Options configure Run.
type Options struct {
	Roles Roles
	// HTTPAddr is the one listener for webhooks, /api/v1, /metrics and health.
	HTTPAddr string
	// Handler overrides the processor's handler (library users); defaults to Forward.
	Handler processor.Handler
	// AfterCommit is passed to processor.Options.AfterCommit: a fault
	// injection seam for the chaos harness (pkg/chaos). Nil in production.
	AfterCommit func([]*processor.Event) error
	// Listening, when set, is called with the bound address once serving.
	Listening func(net.Addr)
	Log       *slog.Logger
	Metrics   *telemetry.Metrics
}

// Run connects to NATS and (for processor and API) Postgres, ensures the
// streams, serves HTTP and runs the selected roles until ctx ends, then
// shuts down in order: stop accepting requests, drain the processor, stop
// the relay, close connections.
func Run(ctx context.Context, cfg *config.Config, o Options) error {
	log := o.Log
	if log == nil {
		log = telemetry.Discard()
	}
	m := o.Metrics
	if m == nil {
		m = telemetry.NewMetrics()
	}
	if cfg.NATS.URL == "" {
		return errors.New("nats.url (or INTAKE_NATS_URL) is required outside `intake dev`")
	}

	// Ingress connects without a reconnect buffer: during an outage it must
	// answer 503 at once, never "accepted" for a write it cannot confirm.
	nc, err := stream.Connect(cfg.NATS.URL, "intake", !o.Roles.Ingress, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := stream.WaitReady(startCtx, js); err != nil {
		return err
	}
	if err := stream.Ensure(startCtx, js, cfg.NATS.Stream); err != nil {
		return err
	}

	var st *store.Store
	if o.Roles.Processor || o.Roles.API {
		if cfg.Postgres.URL == "" {
			return errors.New("postgres.url (or DATABASE_URL) is required")
		}
		// A role started while Postgres restarts waits for it (within the
		// start budget) instead of exiting: one restart should not become a
		// crash loop.
		for attempt := 0; ; attempt++ {
			st, err = store.Open(startCtx, cfg.Postgres.URL, cfg.Postgres.MaxConns)
			if err == nil {
				break
			}
			if startCtx.Err() != nil || !store.Unreachable(err) {
				return err
			}
			if attempt == 0 {
				log.Warn("waiting for postgres", "err", err)
			}
			select {
			case <-startCtx.Done():
				return err
			case <-time.After(500 * time.Millisecond):
			}
		}
		defer st.Close()
		if err := store.CheckMigrated(startCtx, st); err != nil {
			return err
		}
	}

	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	r.Get("/readyz", readyz(nc, st))
	r.Method(http.MethodGet, "/metrics", m.Handler())
	if cfg.Debug.Pprof {
		r.Mount("/debug", middleware.Profiler())
	}
	if o.Roles.Ingress {
		svc, err := ingress.New(cfg, js, m, log)
		if err != nil {
			return err
		}
		svc.Mount(r)
	}
	var rp *replayer.Replayer
	if o.Roles.API {
		rp, err = replayer.New(replayer.Options{Store: st, JS: js, Tokens: cfg.API.Tokens, Log: log, Registry: m.Registry})
		if err != nil {
			return err
		}
		rp.Mount(r)
	}

	ln, err := net.Listen("tcp", o.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.HTTPAddr, err)
	}
	srv := ingress.Server(o.HTTPAddr, r, cfg.Ingress)

	runCtx, stopRoles := context.WithCancel(ctx)
	defer stopRoles()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	})
	if o.Roles.Processor {
		p, err := processor.New(processor.Options{Store: st, JS: js, Config: cfg.Processor, Handler: o.Handler,
			Metrics: m, Log: log})
		if err != nil {
			return err
		}
		wg.Go(func() {
			if err := p.Run(runCtx); err != nil {
				errc <- fmt.Errorf("processor: %w", err)
			}
		})
		relay := processor.NewRelay(st, js, cfg.Outbox, m, log)
		wg.Go(func() {
			if err := relay.Run(runCtx); err != nil {
				errc <- fmt.Errorf("relay: %w", err)
			}
		})
		folder := processor.NewReceiptFolder(st, js, cfg.Processor, m, log)
		wg.Go(func() {
			if err := folder.Run(runCtx); err != nil {
				errc <- fmt.Errorf("receipts: %w", err)
			}
		})
	}
	if rp != nil {
		// Publishes new replays and resumes those a stopped replayer left running.
		wg.Go(func() {
			if err := rp.Run(runCtx); err != nil {
				errc <- fmt.Errorf("replayer: %w", err)
			}
		})
	}
	if o.Listening != nil {
		o.Listening(ln.Addr())
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	log.Info("shutting down")
	shutCtx, cancelShut := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancelShut()
	_ = srv.Shutdown(shutCtx) // in-flight webhooks finish and get their answer
	stopRoles()               // processor drains fetched messages, relay stops
	wg.Wait()
	return runErr
}

func readyz(nc *nats.Conn, st *store.Store) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if nc.Status() != nats.CONNECTED {
			http.Error(w, "nats: "+nc.Status().String(), http.StatusServiceUnavailable)
			return
		}
		if st != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := st.Ping(ctx); err != nil {
				http.Error(w, "postgres unavailable", http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
	}
}
