package processor

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/pkg/envelope"
)

func named(name string) Handler {
	return HandlerFunc(func(context.Context, pgx.Tx, *Event) ([]Message, error) {
		return []Message{{Subject: name}}, nil
	})
}

func TestRouter(t *testing.T) {
	r := NewRouter().
		OnIntegration("stripe", "invoice.*", named("stripe-invoice")).
		On("invoice.*", named("any-invoice")).
		On("customer.*", named("customer"))
	tests := []struct{ integration, typ, want string }{
		{"stripe", "invoice.paid", "stripe-invoice"},
		{"github", "invoice.paid", "any-invoice"},
		{"github", "customer.created", "customer"},
		{"github", "push", "intake.out.acme.github.push"}, // fallback: Forward
	}
	for _, tt := range tests {
		ev := &Event{Key: envelope.Key{Integration: tt.integration, EventID: "1"}, Tenant: "acme", EventType: tt.typ}
		msgs, err := r.Handle(context.Background(), nil, ev)
		if err != nil || len(msgs) != 1 || msgs[0].Subject != tt.want {
			t.Errorf("%s %s routed to %v (%v), want %s", tt.integration, tt.typ, msgs, err, tt.want)
		}
	}
}

func TestRecoverTurnsPanicIntoRetryableError(t *testing.T) {
	h := Chain(HandlerFunc(func(context.Context, pgx.Tx, *Event) ([]Message, error) {
		panic("boom")
	}), Recover())
	_, err := h.Handle(context.Background(), nil, &Event{})
	if err == nil || !strings.Contains(err.Error(), "handler panic: boom") || !strings.Contains(err.Error(), "goroutine") {
		t.Fatalf("err = %v, want a panic error with the stack", err)
	}
	if errors.Is(err, ErrPermanent) {
		t.Fatal("a panic must stay retryable")
	}
}

func TestHandlerMetrics(t *testing.T) {
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h"}, []string{"integration", "result"})
	h := Chain(HandlerFunc(func(context.Context, pgx.Tx, *Event) ([]Message, error) {
		return nil, errors.New("no")
	}), HandlerMetrics(hist), Tracing(nil))
	_, _ = h.Handle(context.Background(), nil, &Event{Key: envelope.Key{Integration: "x"}})
	if n := testutil.CollectAndCount(hist); n != 1 {
		t.Fatalf("%d series observed, want 1", n)
	}
}
