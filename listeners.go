package intake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/intakehq/intake/internal/httpserver"
	"github.com/intakehq/intake/pkg/config"
)

// routers builds the HTTP servers and returns the public router, on which
// the roles mount their routes (webhooks, /api/v1). Health is on every
// listener; /metrics and /debug are on the internal listener when
// http.internal_addr is set (the public one answers 404 for them), else on
// the public one.
func (a *App) routers(cfg *config.Config) (chi.Router, error) {
	public := chi.NewRouter()
	public.Use(middleware.Recoverer)
	a.healthRoutes(public)
	ops := chi.Router(public)
	if cfg.HTTP.InternalAddr != "" {
		internal := chi.NewRouter()
		internal.Use(middleware.Recoverer)
		a.healthRoutes(internal)
		a.isrv = httpserver.New(cfg.HTTP.InternalAddr, internal, cfg.Ingress.Timeouts())
		// No write deadline: a CPU profile (30s by default) outlasts it, and
		// pprof refuses profiles longer than WriteTimeout. Slow clients are
		// still bounded by the read timeouts; the listener is not public.
		a.isrv.WriteTimeout = 0
		ops = internal
	}
	ops.Method(http.MethodGet, "/metrics", a.o.Metrics.Handler())
	if cfg.Debug.Pprof {
		ops.Mount("/debug", middleware.Profiler())
	}
	a.srv = httpserver.New(a.o.HTTPAddr, public, cfg.Ingress.Timeouts())
	// Every role's public listener is capped, not ingress's alone: a
	// replayer's console and API are as reachable before authentication.
	a.maxConns = cfg.Ingress.MaxConnections
	if cfg.HTTP.TLS.Enabled() {
		certs, err := newCertLoader(cfg.HTTP.TLS.CertFile, cfg.HTTP.TLS.KeyFile, a.log)
		if err != nil {
			return nil, err
		}
		a.srv.TLSConfig = certs.config()
	}
	return public, nil
}

func (a *App) healthRoutes(r chi.Router) {
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	r.Get("/readyz", a.readyz)
}

// listen binds the public listener and, when configured, the internal one;
// if either fails neither stays open.
func (a *App) listen() (public, internal net.Listener, err error) {
	public, err = net.Listen("tcp", a.o.HTTPAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen %s: %w", a.o.HTTPAddr, err)
	}
	if a.maxConns > 0 {
		// Counted as intake_ingress_rejected_total, registered with the
		// ingress role only.
		refused := a.o.Metrics.Rejected.WithLabelValues("", "connections")
		limited := httpserver.LimitListener(public, a.maxConns, a.srv.TLSConfig != nil, refused.Inc)
		a.srv.ConnState = chainConnState(a.srv.ConnState, limited.ConnState)
		public = limited
	}
	if a.isrv != nil {
		internal, err = net.Listen("tcp", a.isrv.Addr)
		if err != nil {
			_ = public.Close()
			return nil, nil, fmt.Errorf("listen %s (http.internal_addr): %w", a.isrv.Addr, err)
		}
	}
	return public, internal, nil
}

// chainConnState calls first (if any), then next.
func chainConnState(first, next func(net.Conn, http.ConnState)) func(net.Conn, http.ConnState) {
	if first == nil {
		return next
	}
	return func(c net.Conn, s http.ConnState) {
		first(c, s)
		next(c, s)
	}
}

// serve runs the HTTP servers on the listeners Start bound until Stop.
func (a *App) serve() {
	a.serving.Go(func() {
		var err error
		if a.srv.TLSConfig != nil {
			err = a.srv.ServeTLS(a.ln, "", "") // the certificate comes from TLSConfig.GetCertificate
		} else {
			err = a.srv.Serve(a.ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.fail("http", err)
		}
	})
	if a.isrv != nil {
		a.serving.Go(func() {
			if err := a.isrv.Serve(a.iln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.fail("http internal", err)
			}
		})
	}
}

// shutdownHTTP stops accepting requests and lets those in flight get their
// answer within ctx (then they are cut): the public listener first, so the
// internal one keeps answering /metrics and /readyz while webhooks drain.
func (a *App) shutdownHTTP(ctx context.Context) {
	for _, srv := range []*http.Server{a.srv, a.isrv} {
		if srv == nil {
			continue
		}
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
	}
	a.serving.Wait()
}
