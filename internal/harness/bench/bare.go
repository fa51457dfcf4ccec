package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
)

// ServeBare runs reference (a): a bare net/http server that reads the body
// and answers 200 with a small JSON body, with ingress's server timeouts.
// `intake bench bare-http` runs it as its own process.
func ServeBare(ctx context.Context, addr string) error {
	return serve(ctx, addr, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		accepted(w)
	})
}

// accepted is the references' answer: a small JSON body, as ingress's.
func accepted(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"accepted"}` + "\n"))
}

// serve runs h on addr until ctx ends, then shuts it down; with ingress's
// own timeouts, so a reference serves like it.
func serve(ctx context.Context, addr string, h http.HandlerFunc) error {
	srv := &http.Server{Addr: addr, Handler: h,
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

// ServeBarePublish runs reference (f): the bare server of (a) that, before
// it answers, publishes the body to a JetStream stream configured like
// INTAKE_IN (subject) with the request's webhook-id as Nats-Msg-Id and
// waits for the PubAck, as ingress must — and does nothing else: no
// signature, no checks, no envelope. It is what answering after the
// PubAck costs with net/http and nats.go and none of Intake's code, so
// ingress / (f) is Intake's own share and (f) / (a) the most an ingress
// could reach on the machine. A GET answers without publishing (the
// harness's readiness check). `intake bench bare-publish` runs it as its
// own process.
func ServeBarePublish(ctx context.Context, addr, natsURL, subject string) error {
	nc, err := nats.Connect(natsURL, nats.Name("intake-bench-bare-publish"))
	if err != nil {
		return err
	}
	defer nc.Close()
	return serve(ctx, addr, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusOK)
			return
		}
		var body bytes.Buffer
		if r.ContentLength > 0 {
			body.Grow(int(r.ContentLength) + bytes.MinRead)
		}
		if _, err := body.ReadFrom(io.LimitReader(r.Body, 1<<20)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m := &nats.Msg{Subject: subject, Data: body.Bytes(), Header: nats.Header{envelope.HeaderMsgID: {r.Header.Get("webhook-id")}}}
		resp, err := nc.RequestMsgWithContext(r.Context(), m)
		if err != nil || bytes.Contains(resp.Data, []byte(`"error"`)) {
			http.Error(w, "not stored", http.StatusServiceUnavailable)
			return
		}
		accepted(w)
	})
}
