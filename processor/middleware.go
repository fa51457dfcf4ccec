package processor

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
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

// Tracing wraps each handler run in an OpenTelemetry span. With no tracer
// provider configured (the default) the global one is a no-op and costs
// next to nothing.
func Tracing() Middleware {
	tracer := otel.Tracer("github.com/intakehq/intake/processor")
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *Event) ([]Message, error) {
			// Attributes at the start, where samplers see them.
			ctx, span := tracer.Start(ctx, "intake.handle", trace.WithAttributes(
				attribute.String("intake.key", ev.Key.String()),
				attribute.String("intake.event_type", ev.EventType),
				attribute.String("intake.mode", string(ev.Mode)),
				attribute.String("intake.execution_id", ev.ExecutionID),
			))
			defer span.End()
			msgs, err := next.Handle(ctx, tx, ev)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, "handler failed")
			}
			return msgs, err
		})
	}
}
