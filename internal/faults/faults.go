// Package faults carries the harnesses' fault-injection hooks into the
// processor and the replayer without putting them in a public API: only
// code inside this module can import an internal package, and production
// code never sets a hook. Each service reads the hooks from the context its
// Run is given.
package faults

import "context"

// Hooks are the points where a test or the chaos harness may inject a fault.
type Hooks struct {
	// AfterCommit runs after a batch commits and before its acks; an error
	// skips the acks, as if the processor died between commit and ack.
	AfterCommit func() error
	// AfterPublish runs after a replay batch's PubAcks arrived and before
	// the replayer records them; an error stops publishing the replay as if
	// the replayer died at that moment.
	AfterPublish func(replayID string, acked int) error
}

type hooksKey struct{}

// With returns ctx carrying h.
func With(ctx context.Context, h Hooks) context.Context {
	return context.WithValue(ctx, hooksKey{}, h)
}

// From returns the hooks ctx carries; none when it carries none.
func From(ctx context.Context) Hooks {
	h, _ := ctx.Value(hooksKey{}).(Hooks)
	return h
}
