package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/intakehq/intake/pkg/config"
)

// ServeBare runs reference (a): a bare net/http server that reads the body
// and answers 200 with a small JSON body, with ingress's server timeouts.
// `intake bench bare-http` runs it as its own process.
func ServeBare(ctx context.Context, addr string) error {
	srv := &http.Server{
		Addr: addr,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"accepted"}` + "\n"))
		}),
		// ingress's own timeouts, so the reference serves like it
		ReadHeaderTimeout: config.DefaultReadHeaderTimeout,
		ReadTimeout:       config.DefaultReadTimeout,
		WriteTimeout:      config.DefaultWriteTimeout,
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
