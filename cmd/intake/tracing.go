package main

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/telemetry/otlp"
)

// tracingShutdownTimeout bounds the flush of the last spans on exit.
const tracingShutdownTimeout = 5 * time.Second

// runTraced runs a role with the tracer provider the OTEL_* environment
// asks for (docs/tracing.md; nil, tracing off, without an OTLP endpoint),
// then flushes its spans once the role has stopped.
func runTraced(ctx context.Context, role string, log *slog.Logger, run func(trace.TracerProvider) error) error {
	tr, err := otlp.New(ctx, otlp.Options{Role: role, Version: version})
	if err != nil {
		return err
	}
	if tr.Enabled() {
		log.Info("tracing on: exporting spans over OTLP", "service", role)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingShutdownTimeout)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			log.Warn("tracing: flushing the last spans failed", "err", err)
		}
	}()
	return run(tr.Provider())
}
