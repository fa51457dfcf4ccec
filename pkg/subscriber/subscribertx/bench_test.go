package subscribertx_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/subscriber"
	"github.com/intakehq/intake/pkg/subscriber/subscribertx"
)

// BenchmarkConsumeTx is the kit's cost per event (docs/handlers.md): b.N
// processed messages waiting on INTAKE_OUT, consumed by one ConsumeTx
// whose handler makes the one-INSERT change, each message its own
// transaction (claim, change, commit) and then its ack; fsync on, as the
// bench's processor stages run.
func BenchmarkConsumeTx(b *testing.B) {
	j := testrig.NATS(b, config.Stream{})
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.DurablePostgres(b).URL()) // fsync on: the commit is the cost
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if err := subscribertx.EnsureSchema(ctx, pool); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE payments (key text PRIMARY KEY, body jsonb NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	body := []byte(fmt.Sprintf(`{"pad":"%0900d"}`, 0)) // about the bench's 1 KiB
	var futures []jetstream.PubAckFuture
	for i := range b.N {
		k := envelope.Key{Integration: "demo", Account: "main", EventID: fmt.Sprintf("evt_%d", i)}
		m := nats.NewMsg(envelope.SubjectOut("acme", "demo", "invoice.paid"))
		m.Data = body
		m.Header.Set(envelope.HeaderMsgID, k.String())
		m.Header.Set(envelope.HeaderKey, k.String())
		m.Header.Set(envelope.HeaderTenant, "acme")
		m.Header.Set(envelope.HeaderEventType, "invoice.paid")
		m.Header.Set(envelope.HeaderExecutionID, "x"+k.EventID)
		f, err := j.JS.PublishMsgAsync(m)
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			b.Fatal(err)
		}
	}
	_, js := testrig.Connect(b, j.Server.URL())
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	n := 0
	b.ResetTimer()
	go func() {
		done <- subscribertx.ConsumeTx(cctx, js, pool, subscribertx.Options{Options: subscriber.Options{Durable: "bench"}},
			func(ctx context.Context, tx pgx.Tx, m subscriber.Message) error {
				_, err := tx.Exec(ctx, `INSERT INTO payments (key, body) VALUES ($1, $2)`, m.Key.String(), m.Body)
				if n++; n == b.N {
					defer cancel() // after this one's commit and ack, as ConsumeTx drains
				}
				return err
			})
	}()
	<-cctx.Done()
	if err := <-done; err != nil && err != context.Canceled {
		b.Fatal(err)
	}
	b.StopTimer()
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&rows); err != nil {
		b.Fatal(err)
	}
	if rows != b.N {
		b.Fatalf("%d payments, want %d", rows, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
