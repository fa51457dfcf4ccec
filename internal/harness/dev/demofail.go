package dev

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/processor"
)

// Event types that `intake dev` fails on purpose, so that a newcomer can
// watch an event retry, fail or wait in quarantine, and then replay it
// (`intake send --type demo.quarantine`, README "Try a failure"). Only the
// first run fails (inbox.ModeOriginal): a replay, exact or re-execute, is
// the fix, and processes the event. The production roles have no such
// types: this middleware exists in `intake dev` only.
const (
	DemoFailType       = "demo.fail"       // failed at once (processor.Permanent)
	DemoQuarantineType = "demo.quarantine" // quarantined at once (processor.Quarantine)
	DemoFlakyType      = "demo.flaky"      // a plain error: retried with processor.backoff, then failed
)

// DemoFailures is the middleware behind the demo types, in front of
// whatever handler the config routes to.
func DemoFailures() processor.Middleware {
	return func(next processor.Handler) processor.Handler {
		return processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
			if ev.Mode == inbox.ModeOriginal {
				switch ev.EventType {
				case DemoFailType:
					return nil, processor.Permanent(errors.New("intake dev: " + DemoFailType + " fails on purpose; replay it to see it processed"))
				case DemoQuarantineType:
					return nil, processor.Quarantine(errors.New("intake dev: " + DemoQuarantineType + " is quarantined on purpose; replay it to see it processed"))
				case DemoFlakyType:
					return nil, errors.New("intake dev: " + DemoFlakyType + " fails on every delivery, retried with backoff until it is recorded failed; then replay it")
				}
			}
			return next.Handle(ctx, tx, ev)
		})
	}
}
