package processor

import (
	"context"
	"fmt"
	"path"

	"github.com/jackc/pgx/v5"
)

// Router dispatches events to handlers by event type pattern, so one
// processor binary serves many event types. Patterns use path.Match syntax
// against the event type ("invoice.*", "customer.subscription.*", "*"),
// optionally scoped to one integration; the first registered match wins.
// Events no pattern matches go to the fallback (Forward by default).
type Router struct {
	routes   []route
	fallback Handler
}

type route struct {
	integration, pattern string
	h                    Handler
}

// NewRouter returns a router whose fallback is Forward().
func NewRouter() *Router { return &Router{fallback: Forward()} }

// On routes events of every integration whose type matches pattern.
func (r *Router) On(pattern string, h Handler) *Router {
	return r.OnIntegration("", pattern, h)
}

// OnIntegration routes events of one integration whose type matches pattern.
func (r *Router) OnIntegration(integration, pattern string, h Handler) *Router {
	if _, err := path.Match(pattern, ""); err != nil {
		panic(fmt.Sprintf("processor: bad pattern %q: %v", pattern, err))
	}
	r.routes = append(r.routes, route{integration: integration, pattern: pattern, h: h})
	return r
}

// Fallback sets the handler for unmatched events.
func (r *Router) Fallback(h Handler) *Router {
	r.fallback = h
	return r
}

// Handle implements Handler.
func (r *Router) Handle(ctx context.Context, tx pgx.Tx, ev *Event) ([]Message, error) {
	for _, rt := range r.routes {
		if rt.integration != "" && rt.integration != ev.Key.Integration {
			continue
		}
		if ok, _ := path.Match(rt.pattern, ev.EventType); ok {
			return rt.h.Handle(ctx, tx, ev)
		}
	}
	return r.fallback.Handle(ctx, tx, ev)
}
