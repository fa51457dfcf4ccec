package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/natsserver"
	"github.com/intakehq/intake/internal/harness/pgcluster"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
)

// The processor-count stage (Config.Processors, `intake bench --processors
// 1,2,4`): what more processor processes do for one deployment. For each
// count, a fresh stream and database get the same backlog on INTAKE_IN —
// published as ingress publishes it (envelope.Delivery.Msg), without
// ingress, so filling costs little and the backlog is exact — then that
// many `intake processor` processes, configured for that many replicas
// (processor.replicas sizes the consumer's window), drain it together.
// The first count drains once unmeasured, to size the backlog so that a
// drain lasts about Config.Duration; then every count drains it twice
// (procsPasses). Reported: the committed rate, from the first
// observation with all of them running to the last commit; each
// process's share of those commits; Postgres's cost per event
// (pgcost.go); and each count's rate against the first count's.
//
// When batches wait (a remote call, a slow database) replicas add
// throughput (processor's TestReplicasAddThroughputWhenBatchesWait). Here
// the handler forwards and every process shares this host's cores with
// Postgres and NATS, so on a small host the curve is flat or falls: that
// is the machine's answer, recorded.

// procGuessRate sizes the unmeasured first drain's backlog (events/s one
// processor commits on a small host).
const procGuessRate = 6000

// maxProcessors bounds Config.Processors: each process opens its own pool.
const maxProcessors = 16

// checkProcessors validates Config.Processors.
func checkProcessors(counts []int) error {
	for _, n := range counts {
		if n < 1 || n > maxProcessors {
			return fmt.Errorf("bench: processor count %d: must be 1..%d", n, maxProcessors)
		}
	}
	return nil
}

// procsRun is one count's drain.
type procsRun struct {
	rate      float64   // committed events/s, all processes together
	secs      float64   // the measured part of the drain
	shares    []float64 // each process's part of the measured commits
	meanBatch float64   // events per transaction over the whole drain
	peakRSS   float64   // the largest process's, MiB
	cost      PGCost
}

// procsPasses is how often each count drains: in order, then in reverse,
// so that drift on the host (another tenant, the page cache) moves the
// first and the last count alike.
const procsPasses = 2

func runProcessors(ctx context.Context, c Config, rep *Report, dir string, pg *pgcluster.Cluster, size int) error {
	log := c.Log.With("payload", size)
	counts := c.Processors
	backlog := max(int(procGuessRate*c.Duration.Seconds()), 1000)

	// Size the backlog from what the first count does, so that every drain
	// lasts about Duration: a drain that is not measured.
	r, err := drainWith(ctx, c, dir, pg, size, counts[0], backlog)
	if err != nil {
		return fmt.Errorf("%d processors: %w", counts[0], err)
	}
	backlog = max(int(r.rate*c.Duration.Seconds()), 1000)
	log.Info("backlog sized", "processors", counts[0], "per_second", int(r.rate), "backlog", backlog)

	runs := make([][]procsRun, len(counts)) // by count, then pass
	for pass := range procsPasses {
		for k := range counts {
			i := k
			if pass%2 == 1 {
				i = len(counts) - 1 - k
			}
			n := counts[i]
			r, err := drainWith(ctx, c, dir, pg, size, n, backlog)
			if err != nil {
				return fmt.Errorf("%d processors: %w", n, err)
			}
			runs[i] = append(runs[i], r)
			log.Info("measured", "processors", n, "pass", pass+1, "per_second", int(r.rate), "shares", fmtShares(r.shares))
		}
	}
	rates := make([]float64, len(counts))
	for i, n := range counts {
		var events, secs, batch, rss float64
		var shares []string
		costs := make([]PGCost, len(runs[i]))
		for p, r := range runs[i] {
			events, secs = events+r.rate*r.secs, secs+r.secs
			batch += r.meanBatch / float64(len(runs[i]))
			rss = max(rss, r.peakRSS)
			shares = append(shares, fmtShares(r.shares))
			costs[p] = r.cost
		}
		rates[i] = events / secs
		window := config.Processor{Replicas: n}.WithDefaults().MaxAckPending
		rep.Figures = append(rep.Figures, Figure{Stage: fmt.Sprintf("intake processor ×%d, committed", n), Payload: size, Rate: rates[i], RSSMB: rss,
			Note: fmt.Sprintf("backlog %d, %d passes; shares %s; %.0f per tx; window %d", backlog, len(runs[i]), strings.Join(shares, ", "), batch, window)})
		rep.Postgres = append(rep.Postgres, mergeCosts(costs))
	}
	for i, n := range counts[1:] {
		rep.Ratios = append(rep.Ratios, Ratio{Name: fmt.Sprintf("processor ×%d / ×%d, committed", n, counts[0]), Payload: size,
			Value: rates[i+1] / rates[0]})
	}
	return nil
}

// mergeCosts is the cost per event over several drains of one stage,
// each weighted by its events.
func mergeCosts(costs []PGCost) PGCost {
	if len(costs) == 0 {
		return PGCost{}
	}
	m := PGCost{Stage: costs[0].Stage, Payload: costs[0].Payload}
	for _, c := range costs {
		m.Events += c.Events
	}
	if m.Events == 0 {
		return m
	}
	w := func(c PGCost) float64 { return float64(c.Events) / float64(m.Events) }
	tables := map[string]int{}
	for _, c := range costs {
		m.WALBytes += c.WALBytes * w(c)
		m.CPUMicros += c.CPUMicros * w(c)
		for _, t := range c.Tables {
			k, ok := tables[t.Table]
			if !ok {
				k = len(m.Tables)
				tables[t.Table] = k
				m.Tables = append(m.Tables, TableCost{Table: t.Table})
			}
			m.Tables[k].Rows += t.Rows * w(c)
			m.Tables[k].IndexEntries += t.IndexEntries * w(c)
			m.Tables[k].TableBytes += t.TableBytes * w(c)
			m.Tables[k].IndexBytes += t.IndexBytes * w(c)
		}
	}
	return m
}

// drainWith fills a fresh stream and database with backlog events and
// measures n processors draining them.
func drainWith(ctx context.Context, c Config, dir string, pg *pgcluster.Cluster, size, n, backlog int) (procsRun, error) {
	db := fmt.Sprintf("bench_procs_%d_%d_%d", size, n, time.Now().UnixNano())
	dbURL, drop, err := freshDB(ctx, pg, db)
	if err != nil {
		return procsRun{}, err
	}
	defer drop()
	return drainOn(ctx, c, dir, pg, dbURL, size, n, backlog)
}

// freshDB creates and migrates database name; drop removes it.
func freshDB(ctx context.Context, pg *pgcluster.Cluster, name string) (url string, drop func(), err error) {
	if err := createDB(ctx, pg.URL("postgres"), name); err != nil {
		return "", nil, err
	}
	drop = func() { dropDB(ctx, pg.URL("postgres"), name) }
	if err := store.Migrate(ctx, pg.URL(name), nil); err != nil {
		drop()
		return "", nil, err
	}
	return pg.URL(name), drop, nil
}

// drainOn fills a fresh stream with backlog events and measures n
// processors draining them into the migrated database at dbURL, whatever
// it already holds.
func drainOn(ctx context.Context, c Config, dir string, pg *pgcluster.Cluster, dbURL string, size, n, backlog int) (procsRun, error) {
	tag := fmt.Sprintf("procs-%d-%d-%d", size, n, time.Now().UnixNano())
	natsAddr, err := freeAddr()
	if err != nil {
		return procsRun{}, err
	}
	natsDir := filepath.Join(dir, "nats-"+tag)
	defer os.RemoveAll(natsDir) // a 16 KiB backlog is gigabytes over a run
	emb, err := natsserver.Run(natsserver.Config{Addr: natsAddr, StoreDir: natsDir})
	if err != nil {
		return procsRun{}, err
	}
	defer emb.Shutdown()
	nc, err := nats.Connect(emb.ClientURL())
	if err != nil {
		return procsRun{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return procsRun{}, err
	}
	if err := stream.Ensure(ctx, js, config.Stream{}.WithDefaults()); err != nil {
		return procsRun{}, err
	}
	st, err := store.Open(ctx, dbURL, 4)
	if err != nil {
		return procsRun{}, err
	}
	defer st.Close()
	var before int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM intake.inbox`).Scan(&before); err != nil {
		return procsRun{}, err
	}
	// The scheduled purge stays out of the measurement (prefill.go
	// measures the purge on its own).
	cfgPath := filepath.Join(dir, "intake-"+tag+".yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`nats: {url: %q}
postgres: {url: %q}
processor: {replicas: %d}
retention: {disabled: true}
integrations:
  - {name: bench, provider: standard, tenant: bench, account: a, secrets: [%q], max_body_bytes: 1048576}
`, emb.ClientURL(), dbURL, n, benchSecret)), 0o600); err != nil {
		return procsRun{}, err
	}

	if err := fillBacklog(ctx, js, size, backlog, tag); err != nil {
		return procsRun{}, err
	}

	pgw, err := openPGWindow(ctx, st, pg.PID())
	if err != nil {
		return procsRun{}, err
	}
	// Started together, so the first is alone on the backlog as briefly as
	// can be; the rate counts from when all of them answer.
	procs := make([]*child, n)
	bases := make([]string, n)
	defer stopAll(procs)
	for i := range n {
		addr, err := freeAddr()
		if err != nil {
			return procsRun{}, err
		}
		bases[i] = "http://" + addr
		procs[i], err = startChild(fmt.Sprintf("processor %d of %d", i+1, n), c.Binary, filepath.Join(dir, fmt.Sprintf("processor-%s-%d.log", tag, i+1)), nil,
			"processor", "--config", cfgPath, "--http-addr", addr, "--log-level", "error")
		if err != nil {
			return procsRun{}, err
		}
	}
	for i, p := range procs {
		if err := p.waitReady(ctx, bases[i]+"/healthz"); err != nil {
			return procsRun{}, err
		}
	}
	r, err := drainTogether(ctx, st, bases, backlog, before)
	if err != nil {
		return procsRun{}, err
	}
	if r.cost, err = pgw.close(ctx, fmt.Sprintf("intake processor ×%d", n), size, backlog); err != nil {
		return procsRun{}, err
	}
	for _, p := range procs {
		r.peakRSS = max(r.peakRSS, p.peakRSS())
	}
	return r, nil
}

// fillBacklog publishes events deliveries to INTAKE_IN exactly as ingress
// publishes what it accepted, with up to 4096 PubAcks pending.
func fillBacklog(ctx context.Context, js jetstream.JetStream, size, events int, prefix string) error {
	reqs := newRequests("", provider.Config{}, size, prefix)
	futures := make([]jetstream.PubAckFuture, 0, 4096)
	await := func() error {
		for _, f := range futures {
			select {
			case ack := <-f.Ok():
				if ack.Duplicate {
					return fmt.Errorf("backlog: %s published twice", f.Msg().Header.Get(envelope.HeaderKey))
				}
			case err := <-f.Err():
				return fmt.Errorf("backlog: %w", err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futures = futures[:0]
		return nil
	}
	before, err := js.Stream(ctx, envelope.StreamIn)
	if err != nil {
		return err
	}
	now := time.Now()
	for i := range events {
		id := fmt.Sprintf("%s_%d", prefix, i)
		d := envelope.NewDelivery(envelope.Key{Integration: "bench", Account: "a", EventID: id}, "bench", "bench.event", reqs.body(id), now)
		d.Instance = "bench"
		m := d.Msg()
		m.Header.Set(envelope.HeaderSignature, envelope.Sign([]byte(benchEnvelopeKey), m.Header)) // as ingress signs
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("backlog: %w", err)
		}
		if futures = append(futures, f); len(futures) == cap(futures) {
			if err := await(); err != nil {
				return err
			}
		}
	}
	if err := await(); err != nil {
		return err
	}
	info, err := js.Stream(ctx, envelope.StreamIn)
	if err != nil {
		return err
	}
	if got := info.CachedInfo().State.Msgs - before.CachedInfo().State.Msgs; got != uint64(events) {
		return fmt.Errorf("backlog: %s gained %d messages, want %d", envelope.StreamIn, got, events)
	}
	return nil
}

// drainTogether waits until the processors at bases have committed want
// messages between them, then checks the inbox, which held before rows,
// gained them. The rate runs
// from the last commit seen at the first observation with any commit to
// the last commit, both from the processors' clocks (one host, one
// clock), as drainRate does for one.
func drainTogether(ctx context.Context, st *store.Store, bases []string, want, before int) (procsRun, error) {
	var first []procStats
	poll := 20 * time.Millisecond
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		now := make([]procStats, len(bases))
		var total float64
		for i, b := range bases {
			s, err := scrapeProcessor(ctx, b)
			if err != nil {
				return procsRun{}, err
			}
			now[i] = s
			total += s.Messages
		}
		if first == nil && total > 0 {
			first, poll = now, 250*time.Millisecond
		}
		if total >= float64(want) {
			return measured(ctx, st, first, now, want, before)
		}
		select {
		case <-ctx.Done():
			return procsRun{}, ctx.Err()
		case <-time.After(poll):
		}
	}
	return procsRun{}, fmt.Errorf("%d processors did not commit %d events in 10 minutes", len(bases), want)
}

// measured is drainTogether's result from its first and last observations.
func measured(ctx context.Context, st *store.Store, first, last []procStats, want, before int) (procsRun, error) {
	var m0, m1, t0, t1, txs float64
	from, to := make([]float64, len(first)), make([]float64, len(last))
	for i := range first {
		m0, m1 = m0+first[i].Messages, m1+last[i].Messages
		t0, t1 = max(t0, first[i].Last), max(t1, last[i].Last)
		txs += last[i].Txs
		from[i], to[i] = first[i].Messages, last[i].Messages
	}
	if m1 == m0 || t1 <= t0 {
		return procsRun{}, errors.New("processors committed everything before the first observation; raise the backlog (--duration)")
	}
	r := procsRun{rate: (m1 - m0) / (t1 - t0), secs: t1 - t0, shares: shares(from, to)}
	if txs > 0 {
		r.meanBatch = m1 / txs
	}
	var n int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM intake.inbox`).Scan(&n); err != nil {
		return procsRun{}, err
	}
	if n-before != want {
		return procsRun{}, fmt.Errorf("processors counted %d messages but the inbox gained %d rows, want %d", int(m1), n-before, want)
	}
	return r, nil
}

// shares is each process's part of what all committed between two
// observations (counters at from, then at to).
func shares(from, to []float64) []float64 {
	var total float64
	for i := range to {
		total += to[i] - from[i]
	}
	out := make([]float64, len(to))
	if total <= 0 {
		return out
	}
	for i := range to {
		out[i] = (to[i] - from[i]) / total
	}
	return out
}

// fmtShares renders shares as "26/25/24/25 %".
func fmtShares(s []float64) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprintf("%.0f", 100*v)
	}
	return strings.Join(parts, "/") + " %"
}

// stopAll stops the started processes together (each drains on SIGTERM).
func stopAll(procs []*child) {
	var wg sync.WaitGroup
	for _, p := range procs {
		if p != nil {
			wg.Go(p.stop)
		}
	}
	wg.Wait()
}

func dropDB(ctx context.Context, adminURL, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}
