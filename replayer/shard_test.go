package replayer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/processor"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

// TestShardReplayersReconcileAndRedriveTheirOwn: one INTAKE_IN, two shards
// (processor.shard a: demo, on database A; b: other, on database B), each
// with its processors and its replayer. A commit lost in shard A is
// reported missing by A's replayer only, and A's re-drive pass applies it
// again in database A only; B's replayer finds nothing missing and is
// never shown A's messages; a request naming the other shard's integration
// is refused.
func TestShardReplayersReconcileAndRedriveTheirOwn(t *testing.T) {
	t.Parallel()
	r := setup(t) // NATS, and database A with the effects table
	urlB := testrig.Database(t)
	stB := testrig.Store(t, urlB, 8)
	ctx := context.Background()
	if _, err := stB.Pool().Exec(ctx, `CREATE TABLE effects (key text NOT NULL, execution_id text NOT NULL,
		mode text NOT NULL, replay_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	demo := r.cfg.Integrations[0]
	other := config.Integration{Name: "other", Tenant: "acme", Account: "main"}

	const events = 5
	for i := 1; i <= events; i++ {
		for _, integration := range []string{demo.Name, other.Name} {
			id := fmt.Sprintf("evt_%d", i)
			k := envelope.Key{Integration: integration, Account: "main", EventID: id}
			if _, err := r.js.PublishMsg(ctx, envelope.NewDelivery(k, "acme", "invoice.paid", body(id), time.Now()).Msg()); err != nil {
				t.Fatal(err)
			}
		}
	}

	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	type shard struct {
		name, integration string
		st                *store.Store
		db                *pgxpool.Pool
		rp                *replayer.Replayer
	}
	start := func(name string, st *store.Store, in config.Integration) *shard {
		p, err := processor.New(processor.Options{Store: st, JS: r.js, Integrations: []config.Integration{in}, Handler: r.handler(),
			Config: config.Processor{AckWait: 2 * time.Second, MaxDeliver: 10, BatchSize: 16, Concurrency: 2, Shard: name}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = p.Run(pctx) })
		rp, err := replayer.New(replayer.Options{Store: st, JS: r.js, RedriveInterval: -1, ResumeInterval: 200 * time.Millisecond,
			Shard: name, Integrations: []string{in.Name}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = rp.Run(pctx) }) // publishes the replays its passes start
		return &shard{name: name, integration: in.Name, st: st, db: st.Pool(), rp: rp}
	}
	a, b := start("a", r.store, demo), start("b", stB, other)
	shards := []*shard{a, b}

	count := func(db *pgxpool.Pool, q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	caughtUp := func() bool {
		for _, s := range shards {
			c, err := r.js.Consumer(ctx, envelope.StreamIn, stream.ProcessorDurable(s.name))
			if err != nil {
				return false
			}
			info, err := c.Info(ctx)
			if err != nil || info.NumPending != 0 || info.NumAckPending != 0 {
				return false
			}
		}
		return true
	}
	processed := func(s *shard) int {
		return count(s.db, `SELECT count(*) FROM intake.inbox WHERE integration = $1 AND status = 'processed'`, s.integration)
	}
	testenv.Eventually(t, 60*time.Second, func() bool { return caughtUp() && processed(a) == events && processed(b) == events },
		"the shards never processed %d events each", events)

	// Shard A loses the commit of demo's evt_2 behind Intake's back.
	lost := key("evt_2").String()
	for _, q := range []string{`DELETE FROM intake.inbox WHERE integration || '/' || account || '/' || event_id = $1`,
		`DELETE FROM effects WHERE key = $1`} {
		if _, err := a.db.Exec(ctx, q, lost); err != nil {
			t.Fatal(err)
		}
	}

	resA, err := a.rp.Reconcile(ctx, replayer.ReconcileRequest{FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if resA.Shard != "a" || resA.Checked != events || resA.Pending != 0 || resA.Rejected != 0 || len(resA.Missing) != 1 ||
		resA.Missing[0].Key != lost || resA.AckFloor == 0 {
		t.Fatalf("shard a's reconcile: %+v, want its %d messages checked and %s missing", resA, events, lost)
	}
	resB, err := b.rp.Reconcile(ctx, replayer.ReconcileRequest{FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if resB.Shard != "b" || resB.Checked != events || resB.Pending != 0 || resB.Rejected != 0 || len(resB.Missing) != 0 || resB.Fix != nil {
		t.Fatalf("shard b's reconcile: %+v, want its %d messages checked and nothing missing", resB, events)
	}

	// The other shard's integration is refused by name (400), in a
	// reconcile, a replay's selector or its keys, and a redelivery.
	var re *replayer.RequestError
	if _, err := b.rp.Reconcile(ctx, replayer.ReconcileRequest{FromSeq: 1, Integration: demo.Name}); !errors.As(err, &re) {
		t.Errorf("shard b's reconcile of %s: err = %v, want a RequestError", demo.Name, err)
	}
	for _, sel := range []apiclient.Selector{{Integration: demo.Name, Status: "processed"}, {Keys: []string{lost}}} {
		if _, err := b.rp.Replay(ctx, "test", apiclient.ReplayRequest{Selector: sel}); !errors.As(err, &re) {
			t.Errorf("shard b's replay of %+v: err = %v, want a RequestError", sel, err)
		}
	}
	if _, err := b.rp.Redeliver(ctx, "test", apiclient.RedeliveryRequest{Source: apiclient.SourceOutbox,
		Selector: apiclient.RedeliverySelector{Keys: []string{lost}}}); !errors.As(err, &re) {
		t.Errorf("shard b's redelivery of %s: err = %v, want a RequestError", lost, err)
	}
	// A dry run over the whole stream plans the shard's own events only.
	dry, err := b.rp.Replay(ctx, "test", apiclient.ReplayRequest{Selector: apiclient.Selector{StreamSeq: &apiclient.SeqRange{From: 1}}})
	if err != nil || dry.Matched != events {
		t.Errorf("shard b's dry run over the stream: matched %d (err %v), want its %d events", dry.Matched, err, events)
	}

	// B's re-drive finds nothing; A's replays the lost event into A.
	if pass, err := b.rp.RedrivePass(ctx, apiclient.RedriveFailover); err != nil || pass.Missing != 0 || pass.Redriven != 0 || pass.Checked != events {
		t.Fatalf("shard b's pass: %+v, %v; want its %d messages checked, nothing re-driven", pass, err, events)
	}
	pass, err := a.rp.RedrivePass(ctx, apiclient.RedriveFailover)
	if err != nil || pass.Checked != events || pass.Missing != 1 || pass.Redriven != 1 || len(pass.ReplayIDs) != 1 {
		t.Fatalf("shard a's pass: %+v, %v; want %s re-driven by one replay", pass, err, lost)
	}
	testenv.Eventually(t, 60*time.Second, func() bool {
		rep, err := a.st.GetReplay(ctx, pass.ReplayIDs[0])
		return err == nil && rep.State == store.ReplayDone && rep.Published == 1 && caughtUp() && processed(a) == events
	}, "shard a's re-drive replay never applied %s", lost)

	if n := count(a.db, `SELECT count(*) FROM effects WHERE key = $1`, lost); n != 1 {
		t.Errorf("shard a: %d business rows of %s after the re-drive, want 1", n, lost)
	}
	if n := count(a.db, `SELECT count(*) FROM effects`); n != events {
		t.Errorf("shard a: %d business rows, want %d: others ran again", n, events)
	}
	for _, s := range shards {
		if n := count(s.db, `SELECT count(*) FROM intake.inbox WHERE integration <> $1`, s.integration); n != 0 {
			t.Errorf("shard %s: %d inbox rows of another shard's integration", s.name, n)
		}
		if n := count(s.db, `SELECT count(*) FROM intake.rejected_messages`); n != 0 {
			t.Errorf("shard %s refused %d messages (the re-drive's copy reached the wrong shard?)", s.name, n)
		}
	}
	if n := count(b.db, `SELECT count(*) FROM effects`); n != events {
		t.Errorf("shard b: %d business rows, want its %d untouched", n, events)
	}
	if n := count(b.db, `SELECT count(*) FROM intake.replays`); n != 1 {
		t.Errorf("shard b: %d replays recorded, want its dry run only", n)
	}
	if res, err := a.rp.Reconcile(ctx, replayer.ReconcileRequest{FromSeq: 1}); err != nil || len(res.Missing) != 0 || res.Checked < events {
		t.Errorf("shard a's reconcile after the re-drive: %+v, %v; want nothing missing", res, err)
	}
	if _, err := r.js.Consumer(ctx, envelope.StreamIn, envelope.ConsumerName); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("durable %q: err = %v, want none beside the shards'", envelope.ConsumerName, err)
	}
}

// TestShardReplayerNeedsItsIntegrations: a shard's replayer without
// integrations would answer for none; New refuses it, naming the field.
func TestShardReplayerNeedsItsIntegrations(t *testing.T) {
	t.Parallel()
	r := setup(t)
	_, err := replayer.New(replayer.Options{Store: r.store, JS: r.js, Shard: "a"})
	if err == nil || !strings.Contains(err.Error(), "Options.Integrations") {
		t.Fatalf("New = %v, want a refusal naming Options.Integrations", err)
	}
}
