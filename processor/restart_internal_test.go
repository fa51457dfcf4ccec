package processor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
)

// reports records what supervise reported through WithHealth.
type reports struct {
	mu   sync.Mutex
	errs []error
}

func (r *reports) report(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *reports) last() (error, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) == 0 {
		return nil, 0
	}
	return r.errs[len(r.errs)-1], len(r.errs)
}

func superviseWith(ctx context.Context, grace time.Duration, rep *reports, consume consumeFunc) error {
	o := newRunOptions([]RunOption{WithRestartGrace(grace), WithHealth(rep.report)})
	return supervise(ctx, "test", o, telemetry.Discard(), consume)
}

func TestSuperviseGivesUpAtOnceWhenRefused(t *testing.T) {
	refusal := fmt.Errorf("stream INTAKE_IN: consumer processor: %w: ack policy can not be updated", stream.ErrRefused)
	var rep reports
	calls := 0
	start := time.Now()
	err := superviseWith(context.Background(), time.Hour, &rep, func(_, _ context.Context, _ func()) error {
		calls++
		return refusal
	})
	if !errors.Is(err, ErrCannotConsume) || !errors.Is(err, stream.ErrRefused) || !strings.Contains(err.Error(), "ack policy") {
		t.Fatalf("supervise = %v, want ErrCannotConsume wrapping the refusal", err)
	}
	if calls != 1 || time.Since(start) > time.Minute {
		t.Fatalf("a refusal was retried: %d calls", calls)
	}
	if last, _ := rep.last(); !errors.Is(last, ErrCannotConsume) {
		t.Fatalf("health last reported %v, want the final error", last)
	}
}

func TestSuperviseGivesUpAfterTheGrace(t *testing.T) {
	const grace = 400 * time.Millisecond
	outage := errors.New("nats: timeout")
	var rep reports
	var deadlines []time.Time
	start := time.Now()
	err := superviseWith(context.Background(), grace, &rep, func(_, setup context.Context, _ func()) error {
		d, _ := setup.Deadline()
		deadlines = append(deadlines, d)
		return outage
	})
	took := time.Since(start)
	if !errors.Is(err, ErrCannotConsume) || !errors.Is(err, outage) {
		t.Fatalf("supervise = %v, want ErrCannotConsume wrapping the last failure", err)
	}
	if took < grace {
		t.Fatalf("gave up after %s, before the grace of %s", took, grace)
	}
	if len(deadlines) < 2 {
		t.Fatalf("%d attempts, want retries within the grace", len(deadlines))
	}
	// Every attempt's setup is bounded by the same end of grace, counted
	// from the first attempt.
	for _, d := range deadlines {
		if !d.Equal(deadlines[0]) || d.Sub(start) > grace+time.Second {
			t.Fatalf("setup deadlines %v, want one end of grace after the first attempt", deadlines)
		}
	}
	rep.mu.Lock()
	defer rep.mu.Unlock()
	for _, e := range rep.errs[:len(rep.errs)-1] {
		if e == nil || errors.Is(e, ErrCannotConsume) || !strings.Contains(e.Error(), "retrying") {
			t.Fatalf("health while retrying reported %v, want the failure and that it retries", e)
		}
	}
}

// TestSuperviseCountsTheGraceFromTheFirstAttempt: an attempt that waits out
// its whole setup budget (NATS unreachable at start) uses up the grace; it
// does not start a second one.
func TestSuperviseCountsTheGraceFromTheFirstAttempt(t *testing.T) {
	var rep reports
	calls := 0
	err := superviseWith(context.Background(), 300*time.Millisecond, &rep, func(_, setup context.Context, _ func()) error {
		calls++
		<-setup.Done()
		return fmt.Errorf("stream INTAKE_IN: consumer processor: %w", setup.Err())
	})
	if !errors.Is(err, ErrCannotConsume) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("supervise = %v, want ErrCannotConsume wrapping the setup deadline", err)
	}
	if calls != 1 {
		t.Fatalf("%d attempts, want 1: the first used up the grace", calls)
	}
}

// TestSuperviseKeepsGoingWhileTheConsumerComesBack: a consumer that ends
// and comes back every time never uses up the grace, however long it runs.
func TestSuperviseKeepsGoingWhileTheConsumerComesBack(t *testing.T) {
	const grace = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rep reports
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- superviseWith(ctx, grace, &rep, func(ctx, _ context.Context, consuming func()) error {
			consuming()
			return errors.New("consumer deleted")
		})
	}()
	for time.Since(start) < 4*grace {
		select {
		case err := <-done:
			t.Fatalf("supervise gave up on a consumer that comes back: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("supervise after shutdown = %v, want nil", err)
	}
	if _, n := rep.last(); n < 2 {
		t.Fatalf("%d health reports, want the losses and recoveries", n)
	}
}

func TestSuperviseReturnsNilOnShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var rep reports
	err := superviseWith(ctx, time.Hour, &rep, func(ctx, _ context.Context, consuming func()) error {
		consuming()
		cancel()
		<-ctx.Done()
		return errors.New("iterator drained")
	})
	if err != nil {
		t.Fatalf("supervise = %v, want nil after ctx ended", err)
	}
	if last, n := rep.last(); n != 1 || last != nil {
		t.Fatalf("health reports: last %v of %d, want one healthy report", last, n)
	}
}
