package processor_test

import (
	"context"
	"fmt"
	neturl "net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

// BenchmarkGroupCommit measures committed events/s of the batched processor
// and of the same processor with one transaction per event (batch size 1,
// 8 in flight: the naive receiver), side by side on the same durable
// Postgres (fsync on) and nats-server, and reports the ratio. Each run
// publishes the events first, then starts the processor and times it from
// its first commit to its last (publishing to INTAKE_OUT as in production).
//
// Three handlers: "forward" is the built-in (inbox + execution + outbox rows:
// the processor's own cost); "business-row" also inserts one row per event
// into a business table, one synchronous statement per event as a typical
// handler does; "business-row-queued" queues that insert (Event.Queue), so
// it travels with the batch's own writes.
//
//	go test -run '^$' -bench GroupCommit -benchtime 3x ./processor/
func BenchmarkGroupCommit(b *testing.B) {
	pg := testenv.DurablePostgres(b)
	for _, handler := range []string{"forward", "business-row", "business-row-queued"} {
		b.Run(handler, func(b *testing.B) {
			var h processor.Handler = processor.Forward()
			switch handler {
			case "business-row":
				h = effects()
			case "business-row-queued":
				h = queuedEffects()
			}
			batched, batchedCPU := measureCommits(b, pg.URL(), handler+"_batched", h,
				config.Processor{AckWait: 30 * time.Second, MaxDeliver: 10, BatchSize: 256, BatchWait: 20 * time.Millisecond, Concurrency: 2})
			single, _ := measureCommits(b, pg.URL(), handler+"_single", h,
				config.Processor{AckWait: 30 * time.Second, MaxDeliver: 10, BatchSize: 1, BatchWait: time.Millisecond, Concurrency: 8})
			b.ReportMetric(batched, "batched-ev/s")
			b.ReportMetric(single, "one-tx-ev/s")
			b.ReportMetric(batched/single, "ratio")
			b.ReportMetric(batchedCPU, "batched-cpu-µs/ev")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// measureCommits returns committed events/s and the CPU this process (the
// processor and the embedded nats-server; Postgres is its own process)
// spent per committed event, in µs.
func measureCommits(b *testing.B, adminURL, name string, h processor.Handler, cfg config.Processor) (float64, float64) {
	// Enough that the batched run lasts about a second: at 3,000 its
	// window was a third of one and the ratio swung between 9x and 13x.
	const events = 10000
	var total, cpu time.Duration
	var done float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r := setupBench(b, adminURL, fmt.Sprintf("%s_%d", name, i))
		for j := range events {
			r.publish(fmt.Sprintf("evt_%d", j), fmt.Sprintf(`{"n":%d,"pad":"%0200d"}`, j, j), "")
		}
		m := telemetry.NewMetrics()
		committed := m.Processed.WithLabelValues("demo", "new")
		stop := r.run(processor.Options{Config: cfg, Handler: h, Metrics: m})
		// From the first commit to the last: the consumer's creation and
		// the first fetch are start-up, not throughput.
		testenv.Eventually(b, time.Minute, func() bool { return testutil.ToFloat64(committed) > 0 }, "nothing committed")
		b.StartTimer()
		start, first, cpu0 := time.Now(), testutil.ToFloat64(committed), testenv.CPUTime(b)
		for deadline := time.Now().Add(5 * time.Minute); testutil.ToFloat64(committed) < events; {
			if time.Now().After(deadline) {
				b.Fatalf("processor committed %v of %d events in 5 minutes", testutil.ToFloat64(committed), events)
			}
			time.Sleep(2 * time.Millisecond)
		}
		total += time.Since(start)
		cpu += testenv.CPUTime(b) - cpu0
		done += events - first
		b.StopTimer()
		if n := r.count(`SELECT count(*) FROM intake.inbox`); n != events {
			b.Fatalf("processor counted %d commits, inbox holds %d rows", events, n)
		}
		r.settled(events) // the outbox drains before the next run
		stop()
	}
	return done / total.Seconds(), float64(cpu.Microseconds()) / done
}

// setupBench is setup on a fresh database of the durable cluster.
func setupBench(b *testing.B, adminURL, name string) *rig {
	b.Helper()
	ctx := context.Background()
	db := "bench_" + strings.ReplaceAll(name, "-", "_") + "_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	conn, err := pgxConnect(ctx, adminURL)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		b.Fatal(err)
	}
	conn.Close(ctx)
	return setup(b, replaceDB(adminURL, db))
}

func pgxConnect(ctx context.Context, url string) (*pgx.Conn, error) { return pgx.Connect(ctx, url) }

// replaceDB points a postgres:// URL at another database.
func replaceDB(raw, db string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + db
	return u.String()
}
