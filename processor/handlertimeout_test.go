package processor_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/intakehq/intake/internal/harness/testenv"
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
	if f := testutil.ToFloat64(m.Failures.WithLabelValues("", "db", "")); f != 0 {
		t.Errorf("the handler's timeout counted as %v database failures", f)
	}
	retries := testutil.ToFloat64(m.Failures.WithLabelValues("demo", "retry", ""))
	if retries == 0 {
		t.Errorf("the handler's timeout was not retried as a handler failure")
	}
	// Each handler failure is observed with its delivery number.
	var d dto.Metric
	if err := m.FailureDelivery.WithLabelValues("demo").(prometheus.Metric).Write(&d); err != nil {
		t.Fatal(err)
	}
	if n := d.GetHistogram().GetSampleCount(); float64(n) < retries {
		t.Errorf("intake_processor_failure_delivery observed %d failures, want at least the %v retries", n, retries)
	}
}
