package processor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/processor"
)

// TestShardsSplitOneStreamAcrossTwoDatabases is the design past one
// Postgres primary (docs/scaling.md): one INTAKE_IN, two databases, two
// processor groups of two with disjoint integrations (processor.shard).
// Every event is applied exactly once, in its integration's shard's
// database and no other; neither shard sees, refuses or terminates the
// other's messages, nor those of an integration in no shard.
func TestShardsSplitOneStreamAcrossTwoDatabases(t *testing.T) {
	t.Parallel()
	r := setup(t, "") // NATS, and database A with the effects table
	urlB := testrig.Database(t)
	stB := testrig.Store(t, urlB, 8)
	if _, err := stB.Pool().Exec(context.Background(), `CREATE TABLE effects (key text NOT NULL, at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	other := config.Integration{Name: "other", Tenant: "acme", Account: "main"}
	const events, strays = 60, 5
	publish := func(integration, id string) {
		k := envelope.Key{Integration: integration, Account: "main", EventID: id}
		r.publishMsg(envelope.NewDelivery(k, "acme", "thing.happened", fmt.Appendf(nil, `{"id":%q}`, id), time.Now()).Msg())
	}
	for i := range events {
		publish(demo.Name, fmt.Sprintf("evt_%d", i))
		publish(other.Name, fmt.Sprintf("evt_%d", i))
		if i < strays {
			publish("stray", fmt.Sprintf("evt_%d", i)) // configured in no shard
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	shard := func(name string, st *store.Store, in config.Integration) {
		for range 2 {
			p, err := processor.New(processor.Options{Store: st, JS: r.js, Integrations: []config.Integration{in}, Handler: effects(),
				Config: config.Processor{AckWait: 2 * time.Second, MaxDeliver: 10, BatchSize: 16, Concurrency: 2, Shard: name}})
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { _ = p.Run(ctx) })
		}
	}
	shard("a", r.store, demo)
	shard("b", stB, other)

	settled := func(db *pgxpool.Pool) bool {
		var rows, pending int
		err := db.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM intake.inbox), (SELECT count(*) FROM intake.outbox_pending)`).
			Scan(&rows, &pending)
		return err == nil && rows == events && pending == 0
	}
	testenv.Eventually(t, 60*time.Second, func() bool { return settled(r.db) && settled(stB.Pool()) },
		"the shards never held %d events each with nothing left to publish", events)

	for _, db := range []struct {
		name, integration string
		pool              *pgxpool.Pool
	}{{"a", demo.Name, r.db}, {"b", other.Name, stB.Pool()}} {
		count := func(q string, args ...any) int {
			var n int
			if err := db.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := count(`SELECT count(*) FROM intake.inbox WHERE integration = $1 AND status = 'processed'`, db.integration); n != events {
			t.Errorf("shard %s: %d processed inbox rows of %s, want %d", db.name, n, db.integration, events)
		}
		if n := count(`SELECT count(*) FROM intake.inbox WHERE integration <> $1`, db.integration); n != 0 {
			t.Errorf("shard %s: %d inbox rows of other integrations", db.name, n)
		}
		if n := count(`SELECT count(DISTINCT key) FROM effects WHERE key LIKE $1 || '/%'`, db.integration); n != events {
			t.Errorf("shard %s: %d distinct business rows, want %d", db.name, n, events)
		}
		if n := count(`SELECT count(*) - count(DISTINCT key) FROM effects`); n != 0 {
			t.Errorf("shard %s: %d business rows applied twice", db.name, n)
		}
		if n := count(`SELECT count(*) FROM intake.rejected_messages`); n != 0 {
			t.Errorf("shard %s refused %d messages: it was delivered another shard's", db.name, n)
		}
	}

	// Each shard's durable has taken all of its own and nothing else; the
	// strays wait in the stream for a shard that lists their integration.
	js := r.js
	testenv.Eventually(t, 30*time.Second, func() bool {
		for _, name := range []string{"a", "b"} {
			c, err := js.Consumer(context.Background(), envelope.StreamIn, stream.ProcessorDurable(name))
			if err != nil {
				return false
			}
			info, err := c.Info(context.Background())
			if err != nil || info.NumPending != 0 || info.NumAckPending != 0 {
				return false
			}
		}
		return true
	}, "the shards' durables never caught up")
	if _, err := js.Consumer(context.Background(), envelope.StreamIn, envelope.ConsumerName); err == nil {
		t.Error("a durable \"processor\" on every integration exists beside the shards'")
	}
	if n := len(r.tr.Messages(t, envelope.StreamIn)); n != 2*events+strays {
		t.Errorf("INTAKE_IN holds %d messages, want %d", n, 2*events+strays)
	}
	out := r.outCount()
	if len(out) != 2*events {
		t.Errorf("INTAKE_OUT has %d keys, want %d", len(out), 2*events)
	}
	for k, n := range out {
		if n != 1 {
			t.Errorf("%s on INTAKE_OUT %d times", k, n)
		}
	}
}
