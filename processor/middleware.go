package processor

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/telemetry"
)

// Recover turns a handler panic into a retryable error carrying the stack,
// so one bad event cannot take the processor down: its transaction rolls
// back and the message is redelivered with backoff, then marked failed.
func Recover() Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *Event) (msgs []Message, err error) {
			defer func() {
				if r := recover(); r != nil {
					msgs, err = nil, fmt.Errorf("handler panic: %v\n%s", r, debug.Stack())
				}
			}()
			return next.Handle(ctx, tx, ev)
		})
	}
}

// HandlerMetrics observes handler duration by integration and result.
func HandlerMetrics(h *prometheus.HistogramVec) Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *Event) ([]Message, error) {
			start := time.Now()
			msgs, err := next.Handle(ctx, tx, ev)
			result := "ok"
			if err != nil {
				result = "error"
			}
			h.WithLabelValues(ev.Key.Integration, result).Observe(time.Since(start).Seconds())
			return msgs, err
		})
	}
}

// Tracing wraps each handler run in an OpenTelemetry span (intake.handle)
// of tp, a child of the event's span when the processor traces too
// (Options.TracerProvider, which adds it for every handler). nil tp is no
// middleware at all: nothing is allocated per event.
func Tracing(tp trace.TracerProvider) Middleware {
	return handlerTracing(telemetry.Tracer(tp))
}
