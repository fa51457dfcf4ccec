package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/pkg/stream"
)

// DefaultRestartGrace is how long Run keeps trying to get its consumer back
// (re-creating it after it ended, or creating it at start) before it gives
// up: long enough to ride out a NATS restart or a leader election, short
// enough that a processor that cannot work exits and says why.
const DefaultRestartGrace = 30 * time.Second

// ErrCannotConsume is wrapped by the error Processor.Run and
// ReceiptFolder.Run return when they gave up on their consumer: at once when
// JetStream refused it (stream.ErrRefused: an incompatible consumer of the
// same name, a missing stream, a limit), or when it could not be created for
// longer than the restart grace. The process cannot do this role's work any
// more; restarting it (which ensures the streams again) is the way out.
var ErrCannotConsume = errors.New("cannot consume")

// RunOption configures one call of Processor.Run or ReceiptFolder.Run: how
// its owner supervises it.
type RunOption func(*runOptions)

type runOptions struct {
	grace  time.Duration
	health func(error)
}

// WithRestartGrace sets how long Run keeps trying to get its consumer back
// before it returns an error wrapping ErrCannotConsume. Defaults to
// DefaultRestartGrace; zero or less keeps the default.
func WithRestartGrace(d time.Duration) RunOption {
	return func(o *runOptions) {
		if d > 0 {
			o.grace = d
		}
	}
}

// WithHealth has Run report whether it is consuming: report(err) each time
// its consumer ended or could not be created (Run retries), and report(nil)
// once it consumes again. Processor.Run also reports an error while its
// batches keep failing in Intake's own writes (NotReadyAfter in a row),
// and nil once one commits. A readiness check shows the last report.
// Report is called from Run's goroutines, one at a time, and must not block.
func WithHealth(report func(error)) RunOption {
	return func(o *runOptions) { o.health = report }
}

func newRunOptions(opts []RunOption) runOptions {
	o := runOptions{grace: DefaultRestartGrace, health: func(error) {}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// restartBackoff spaces the attempts to get a consumer back.
var restartBackoff = backoff.Backoff{Min: 250 * time.Millisecond, Max: 5 * time.Second}

// consumeFunc sets up a consumer and consumes until it ends or shutdown
// does (Run's context). Setting up is bounded by setup, the end of the
// restart grace; once the consumer is set up and its pull started (before
// any message arrives), it calls consuming.
type consumeFunc func(shutdown, setup context.Context, consuming func()) error

// supervise runs consume again each time it ends, with backoff, until ctx
// ends (then it returns nil). It gives up with ErrCannotConsume when the
// consumer is refused, or cannot be got back within grace of losing it.
func supervise(ctx context.Context, what string, o runOptions, log *slog.Logger, consume consumeFunc) error {
	// failingSince is when the consumer was lost (or, at start, the first
	// attempt began); zero while consuming.
	var failingSince time.Time
	attempt := 0
	for {
		began := time.Now()
		deadline := failingSince.Add(o.grace)
		if failingSince.IsZero() {
			deadline = began.Add(o.grace)
		}
		setup, cancel := context.WithDeadline(ctx, deadline)
		consumed := false
		err := consume(ctx, setup, func() {
			consumed, failingSince, attempt = true, time.Time{}, 0
			o.health(nil)
		})
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("consumer ended")
		}
		if failingSince.IsZero() {
			failingSince = began
			if consumed {
				failingSince = time.Now()
			}
		}
		if errors.Is(err, stream.ErrRefused) {
			err = fmt.Errorf("%w: %w", ErrCannotConsume, err)
			o.health(err)
			return err
		}
		if down := time.Since(failingSince); down >= o.grace {
			err = fmt.Errorf("%w: no consumer for %s: %w", ErrCannotConsume, down.Round(time.Millisecond), err)
			o.health(err)
			return err
		}
		o.health(fmt.Errorf("consumer lost, retrying: %w", err))
		wait := restartBackoff.Next(attempt)
		attempt++
		log.Warn(what+" consumer ended; restarting", "err", err, "retry_in", wait)
		if backoff.Sleep(ctx, wait) != nil {
			return nil
		}
	}
}
