package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/dispatcher"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

// The dispatcher's parts (issue 32). A delivery is, at the least, the HTTP
// exchange the bare client makes (client and receiver), a message taken
// from INTAKE_OUT and acknowledged (reference g), and its row in the
// delivery log (reference h). Each is measured here on the run's own NATS
// server and Postgres with none of the dispatcher's code between them, as
// the machine's CPU per delivery (/proc/stat: every process and the
// kernel's work for them). Added, they bound the dispatcher's rate with
// every core busy; the dispatcher's own CPU per delivery over theirs says
// how much of it is its own work.

// dispatchParts is the parts' rates and CPU per delivery: the machine's
// (take.machine, log.machine), with this process's and Postgres's parts.
type dispatchParts struct {
	take, log         cpuReading
	takeRate, logRate float64
}

// parts measures (g) and (h) with n messages each.
func (d *dispatchRun) parts(ctx context.Context, size, n int, url string) (dispatchParts, error) {
	var p dispatchParts
	var err error
	if p.takeRate, p.take, err = d.takeRef(ctx, size, n, url); err != nil {
		return p, fmt.Errorf("reference (g): %w", err)
	}
	if p.logRate, p.log, err = d.logRef(ctx, size, n); err != nil {
		return p, fmt.Errorf("reference (h): %w", err)
	}
	return p, nil
}

// takeRef is (g): n messages published to a destination's consumer as the
// relay publishes them, fetched as the dispatcher fetches (a window of 2 ×
// max_in_flight) and each acknowledged, nothing else done with them; it
// returns messages per second and the machine's CPU per message, the
// acknowledgements counted until the server has taken them all.
func (d *dispatchRun) takeRef(ctx context.Context, size, n int, url string) (float64, cpuReading, error) {
	var none cpuReading
	tenant := fmt.Sprintf("take%d", size)
	dest := d.destination("take-"+fmt.Sprint(size), tenant, url)
	cons, err := d.env.js.CreateOrUpdateConsumer(ctx, envelope.StreamOut, dispatcher.ConsumerConfig(dest))
	if err != nil {
		return 0, none, err
	}
	if err := newOutPublisher(d.env.js, tenant, size).backlog(ctx, n); err != nil {
		return 0, none, err
	}
	meter := cpuMeter{pgPID: d.pgPID}
	start, cpu0 := time.Now(), meter.read()
	for got := 0; got < n; {
		batch, err := cons.Fetch(min(2*dest.MaxInFlight, n-got), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return 0, none, err
		}
		k := 0
		for m := range batch.Messages() {
			_ = m.Ack()
			k++
		}
		if k == 0 {
			return 0, none, fmt.Errorf("no message after %d of %d: %v", got, n, batch.Error())
		}
		got += k
	}
	if err := d.settled(ctx, dest, 30*time.Second); err != nil {
		return 0, none, err
	}
	secs, cpu := time.Since(start).Seconds(), meter.read().sub(cpu0)
	return float64(n) / secs, cpu.per(float64(n)), nil
}

// logRef is (h): n delivery-log rows, each as the dispatcher writes a
// first attempt's, written as its log writer writes them (a COPY of 64, one
// at a time); it returns rows per second and the machine's CPU per row
// (the client and Postgres).
func (d *dispatchRun) logRef(ctx context.Context, size, n int) (float64, cpuReading, error) {
	const batch = 64
	if n == 0 {
		return 0, cpuReading{}, errors.New("no row")
	}
	rows := make([]store.DispatchAttempt, 0, batch)
	dest := fmt.Sprintf("log-%d", size)
	meter := cpuMeter{pgPID: d.pgPID}
	start, cpu0 := time.Now(), meter.read()
	for i := range n {
		k := envelope.Key{Integration: "bench", Account: "a", EventID: fmt.Sprintf("log%d_%d", size, i)}
		rows = append(rows, store.DispatchAttempt{Destination: dest, MsgID: fmt.Sprintf("msg_log%d_%d", size, i),
			Key: k.String(), Integration: k.Integration, Tenant: "log", EventType: "bench.event", StreamSeq: uint64(i + 1),
			Attempt: 1, Outcome: store.DispatchDelivered, StatusCode: 204, Latency: time.Millisecond, AttemptedAt: time.Now()})
		if len(rows) == batch || i == n-1 {
			if err := d.env.st.RecordDispatchAttempts(ctx, rows); err != nil {
				return 0, cpuReading{}, err
			}
			rows = rows[:0]
		}
	}
	secs, cpu := time.Since(start).Seconds(), meter.read().sub(cpu0)
	return float64(n) / secs, cpu.per(float64(n)), nil
}
