package processor_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

// TestATimingOutHandlerDoesNotStallTheBacklog: a handler whose downstream
// call times out (url.Error wrapping a deadline: a net.Error, which looks
// transient) fails by its own retry budget; it neither holds its worker
// forever nor stops the pull for the rest of the backlog (review finding).
// One event whose handler.s downstream HTTP call times out (url.Error:
// a net.Error, so store.Transient): does the rest of the backlog proceed?
func TestATimingOutHandlerDoesNotStallTheBacklog(t *testing.T) {
	r := setup(t, testenv.Postgres(t))
	r.publish("evt_bad", `{}`, "")
	const events = 40
	for i := range events {
		r.publish(fmt.Sprintf("evt_%d", i), `{}`, "")
	}
	m := telemetry.NewMetrics()
	r.run(processor.Options{
		Config:  config.Processor{AckWait: 2 * time.Second, BatchSize: 1, Concurrency: 2, MaxDeliver: 10},
		Metrics: m,
		Handler: processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
			if ev.Key.EventID == "evt_bad" {
				return nil, &url.Error{Op: "Post", URL: "http://downstream", Err: context.DeadlineExceeded}
			}
			time.Sleep(100 * time.Millisecond)
			return nil, nil
		}),
	})
	deadline := time.Now().Add(60 * time.Second)
	n := 0
	for time.Now().Before(deadline) {
		n = r.count(`SELECT count(*) FROM intake.inbox WHERE status = 'processed'`)
		if n == events {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n != events {
		t.Fatalf("backlog stalled behind one handler timing out: %d of %d processed", n, events)
	}
	if f := testutil.ToFloat64(m.Failures.WithLabelValues("", "db")); f != 0 {
		t.Errorf("the handler's timeout counted as %v database failures", f)
	}
	if f := testutil.ToFloat64(m.Failures.WithLabelValues("demo", "retry")); f == 0 {
		t.Errorf("the handler's timeout was not retried as a handler failure")
	}
}
