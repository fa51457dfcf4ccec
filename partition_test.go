package intake_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/faultproxy"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/processor"
	"github.com/intakehq/intake/replayer/apiclient"
)

// partitionFor is how long the tests' partitions last: longer than every
// deadline Intake sets on a connection (connect 5s, TCP user timeout 15s,
// NATS pings 5s × 2), shorter than the issue's 30–45s (`intake bench chaos
// --partition` runs those).
const partitionFor = 20 * time.Second

// proxied starts a fault proxy to url's host (a Postgres URL or a NATS
// one) and returns url through it.
func proxied(t *testing.T, url string) (string, *faultproxy.Proxy) {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	return u.String(), p
}

// readyCode is /readyz's status, 0 when it did not answer within 10s.
func readyCode(base string) int {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(base + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAProcessorRecoversFromAPostgresPartition: the processor's flows to
// Postgres hang (blackholed, never closed) under a steady load. /readyz
// turns 503 within its 2s round trip; after the heal the processor
// recovers by itself (its dials give up after connect_timeout, the
// server ends the transaction the partition caught mid-way after
// idle_in_transaction_session_timeout, releasing its claim and key lock)
// and every event is applied once: one inbox row each, processed, and one
// INTAKE_OUT message each.
func TestAProcessorRecoversFromAPostgresPartition(t *testing.T) {
	t.Parallel()
	rig := testrig.New(t, testrig.Options{Config: testConfig})
	cfg := *rig.Config
	var pg *faultproxy.Proxy
	cfg.Postgres.URL, pg = proxied(t, rig.DBURL)
	// One batch is caught by the partition mid-transaction, as under load
	// some always is: its handler holds it until the flows are frozen, so
	// its session is left on the server "idle in transaction", holding
	// evt_30's claim and key lock.
	inTx, frozen := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	fwd := processor.Forward()
	handler := processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		if ev.Key.EventID == "evt_30" && held.CompareAndSwap(false, true) {
			close(inTx)
			<-frozen
		}
		return fwd.Handle(ctx, tx, ev)
	})
	a := testrig.StartApp(t, &cfg, intake.Options{Roles: intake.Roles{Processor: true}, Handler: handler})

	// A steady load, from before the partition to after the heal.
	ctx := context.Background()
	var published atomic.Int64
	stop := make(chan struct{})
	var load sync.WaitGroup
	load.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			k := envelope.Key{Integration: "demo", Account: "main", EventID: fmt.Sprintf("evt_%d", i)}
			msg := envelope.NewDelivery(k, "acme", "invoice.paid", demoBody(k.EventID, "hi"), time.Now()).Msg()
			if _, err := rig.JS.PublishMsg(ctx, msg); err != nil {
				t.Errorf("publish %s: %v", k.EventID, err)
				return
			}
			published.Add(1)
		}
	})
	processed := func() int {
		return rig.Count(t, `SELECT count(*) FROM intake.inbox WHERE status = 'processed'`)
	}
	select {
	case <-inTx:
	case <-time.After(time.Minute):
		t.Fatal("evt_30's batch never reached its handler")
	}

	pg.SetMode(faultproxy.Blackhole)
	cut := time.Now()
	close(frozen)
	testenv.Eventually(t, 30*time.Second, func() bool { return readyCode(a.URL) == http.StatusServiceUnavailable },
		"/readyz stayed ready with Postgres partitioned away")
	t.Logf("/readyz 503 %s after the partition began", time.Since(cut).Round(100*time.Millisecond))
	time.Sleep(partitionFor - time.Since(cut)) // the partition's length is the scenario

	pg.SetMode(faultproxy.Pass)
	healed := time.Now()
	time.Sleep(2 * time.Second) // load goes on across the heal
	close(stop)
	load.Wait()
	want := int(published.Load())
	rig.Settled(t, want, 2*time.Minute)
	testenv.Eventually(t, time.Minute, func() bool { return processed() == want }, "not every event was processed after the heal")
	t.Logf("all %d events processed %s after the heal", want, time.Since(healed).Round(100*time.Millisecond))
	testenv.Eventually(t, time.Minute, func() bool { return readyCode(a.URL) == http.StatusOK },
		"/readyz never became ready again after the heal")
	rig.CaughtUp(t, time.Minute)

	if n := rig.Count(t, `SELECT count(*) FROM intake.inbox`); n != want {
		t.Errorf("inbox holds %d rows for %d events", n, want)
	}
	s, err := rig.JS.Stream(ctx, envelope.StreamOut)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(want) {
		t.Errorf("INTAKE_OUT holds %d messages for %d events, want one each", info.State.Msgs, want)
	}
}

// TestIngressAnswersThroughANATSPartitionAndRecovers: ingress's flow to
// NATS hangs (blackholed) under a steady stream of webhooks. Every request
// is answered within GitHub's 10s (503 with Retry-After, or 200), /readyz
// turns 503, nothing answered 200 is lost, and after the heal ingress
// accepts again by itself: its pings (5s × 2) give the dead connection up
// and it reconnects.
func TestIngressAnswersThroughANATSPartitionAndRecovers(t *testing.T) {
	t.Parallel()
	rig := testrig.New(t, testrig.Options{Config: testConfig, NoDatabase: true})
	cfg := *rig.Config
	var nc *faultproxy.Proxy
	cfg.NATS.URL, nc = proxied(t, rig.Server.URL())
	a := testrig.StartApp(t, &cfg, intake.Options{Roles: intake.Roles{Ingress: true}})
	in, _ := cfg.Integration("demo")

	// GitHub's patience: a request not answered within 10s has failed.
	client := &http.Client{Timeout: 10 * time.Second}
	type answer struct {
		key        string
		code       int
		retryAfter string
		took       time.Duration
		err        error
	}
	var (
		mu      sync.Mutex
		answers []answer
		sent    sync.WaitGroup
		seq     atomic.Int64
	)
	post := func() answer {
		id := fmt.Sprintf("evt_%d", seq.Add(1))
		body := demoBody(id, "hi")
		h, err := provider.Sign(in.Config, len(in.Secrets)-1, id, body, time.Now())
		if err != nil {
			t.Error(err)
			return answer{err: err}
		}
		req, _ := http.NewRequest(http.MethodPost, a.URL+"/webhooks/demo", bytes.NewReader(body))
		req.Header = h
		start := time.Now()
		resp, err := client.Do(req)
		an := answer{key: envelope.Key{Integration: "demo", Account: "main", EventID: id}.String(), took: time.Since(start), err: err}
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			an.code, an.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
		}
		mu.Lock()
		answers = append(answers, an)
		mu.Unlock()
		return an
	}
	stop := make(chan struct{})
	var load sync.WaitGroup
	load.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sent.Go(func() { post() })
			}
		}
	})
	testenv.Eventually(t, 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(answers) >= 20 },
		"no webhook answered before the partition")

	nc.SetMode(faultproxy.Blackhole)
	cut := time.Now()
	testenv.Eventually(t, 30*time.Second, func() bool { return readyCode(a.URL) == http.StatusServiceUnavailable },
		"/readyz stayed ready with NATS partitioned away")
	t.Logf("/readyz 503 %s after the partition began", time.Since(cut).Round(100*time.Millisecond))
	time.Sleep(partitionFor - time.Since(cut)) // the partition's length is the scenario

	nc.SetMode(faultproxy.Pass)
	healed := time.Now()
	testenv.Eventually(t, time.Minute, func() bool { return post().code == http.StatusOK },
		"ingress never accepted a webhook again after the heal")
	t.Logf("ingress accepting again %s after the heal", time.Since(healed).Round(100*time.Millisecond))
	testenv.Eventually(t, 30*time.Second, func() bool { return readyCode(a.URL) == http.StatusOK },
		"/readyz never became ready again after the heal")
	close(stop)
	load.Wait()
	sent.Wait()

	stored := rig.CountBy(t, envelope.StreamIn, envelope.HeaderKey)
	var took []time.Duration
	refused := 0
	for _, an := range answers {
		switch {
		case an.err != nil:
			t.Errorf("%s: no answer within 10s: %v", an.key, an.err)
		case an.code == http.StatusOK:
			if stored[an.key] != 1 {
				t.Errorf("%s answered 200, INTAKE_IN holds it %d times", an.key, stored[an.key])
			}
		case an.code == http.StatusServiceUnavailable && an.retryAfter != "":
			refused++
		default:
			t.Errorf("%s: answered %d (Retry-After %q), want 200 or 503 with Retry-After", an.key, an.code, an.retryAfter)
		}
		took = append(took, an.took)
	}
	slices.Sort(took)
	t.Logf("%d webhooks, %d refused with 503; answer time p99 %s, max %s", len(answers), refused,
		took[len(took)*99/100].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	if refused == 0 {
		t.Error("no webhook was refused during the partition: was it one?")
	}
}

// TestAReplayResumesAfterAPostgresPartition: the replayer's flows to
// Postgres hang (blackholed) while it publishes an exact replay. The
// replay pauses (every statement on its lock's connection is bounded),
// and after the heal it resumes by itself — the lock's session the
// partition left on the server is ended by the replayer that gave it up —
// and finishes with each event's copy published once.
func TestAReplayResumesAfterAPostgresPartition(t *testing.T) {
	t.Parallel()
	const events = 150
	rig := testrig.New(t, testrig.Options{Config: testConfig, Mutate: func(c *config.Config) {
		c.API.Replays.ResumeInterval = time.Second
		c.API.RedriveInterval = -1 // this test is about the replay
	}})
	testrig.StartApp(t, rig.Config, intake.Options{Roles: intake.Roles{Processor: true}})
	cfg := *rig.Config
	var pg *faultproxy.Proxy
	cfg.Postgres.URL, pg = proxied(t, rig.DBURL)
	rp := testrig.StartApp(t, &cfg, intake.Options{Roles: intake.Roles{Replayer: true}})

	ctx := context.Background()
	for i := range events {
		k := envelope.Key{Integration: "demo", Account: "main", EventID: fmt.Sprintf("evt_%d", i)}
		msg := envelope.NewDelivery(k, "acme", "invoice.paid", demoBody(k.EventID, "hi"), time.Now()).Msg()
		if _, err := rig.JS.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	rig.Settled(t, events, time.Minute)

	no := false
	rep, err := apiclient.New(rp.URL, operatorToken, nil).StartReplay(ctx, apiclient.ReplayRequest{
		Selector: apiclient.Selector{Integration: "demo", Status: "processed"}, DryRun: &no, Rate: 20, Reason: "partition test"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Matched != events {
		t.Fatalf("replay matched %d events, want %d", rep.Matched, events)
	}
	progress := func() (state string, published int) {
		if err := rig.DB.QueryRow(ctx, `SELECT state, published FROM intake.replays WHERE id = $1`, rep.ID).
			Scan(&state, &published); err != nil {
			t.Fatal(err)
		}
		return state, published
	}
	testenv.Eventually(t, time.Minute, func() bool { _, n := progress(); return n >= 20 }, "the replay never got going")

	pg.SetMode(faultproxy.Blackhole)
	_, before := progress()
	time.Sleep(partitionFor) // the partition's length is the scenario
	pg.SetMode(faultproxy.Pass)
	healed := time.Now()
	_, during := progress()

	var state string
	testenv.Eventually(t, 2*time.Minute, func() bool { state, _ = progress(); return state != "running" },
		"the replay never finished after the heal")
	t.Logf("replay %s %s after the heal; published %d when cut, %d recorded by the heal", state,
		time.Since(healed).Round(100*time.Millisecond), before, during)
	if state != "done" {
		t.Errorf("replay ended %s, want done", state)
	}
	copies := map[string]int{}
	for _, m := range rig.Messages(t, envelope.StreamIn) {
		if m.Header.Get(envelope.HeaderReplayID) == rep.ID {
			copies[m.Header.Get(envelope.HeaderKey)]++
		}
	}
	if len(copies) != events {
		t.Errorf("INTAKE_IN holds copies of %d events, want %d", len(copies), events)
	}
	for k, n := range copies {
		if n != 1 {
			t.Errorf("%s published %d times by the replay", k, n)
		}
	}
}
