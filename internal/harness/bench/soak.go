package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/pgcluster"
	"github.com/intakehq/intake/internal/harness/scrape"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
)

// The soak (`intake bench soak`): ingress and processor as their own
// processes, on a private Postgres and an embedded NATS, under a fixed
// offered load for a long time, measured interval by interval. A short
// saturation of ingress at the start sets the load (SoakConfig.Load of
// it); the backlog it leaves is drained before the clock starts. Every
// interval reports what a user would watch: the accepted rate and ingress
// latency, end to end (2xx to the event's message on INTAKE_OUT), the
// processor's rate and lag, the outbox pending list, both roles' memory,
// and the hot tables' dead rows and size. The verdict compares the last
// window with the first (SoakVerdict).

// Soak defaults.
const (
	DefaultSoakDuration = 30 * time.Minute
	DefaultSoakLoad     = 0.7
	DefaultSoakPayload  = 1024
	DefaultSoakInterval = time.Minute
	// soakSaturation is how long ingress is saturated to measure its maximum.
	soakSaturation = 10 * time.Second
	// soakE2EWait is how long an interval's events may take to reach
	// INTAKE_OUT before they count as late (their latency then counts as
	// at least this).
	soakE2EWait = 30 * time.Second
	// soakWindow is the compared window of a run of at least
	// soakLongRun; shorter runs compare their first and last fifth.
	soakWindow  = 5 * time.Minute
	soakLongRun = 10 * time.Minute
)

// soakTables are the tables written for every event, and the one emptied
// for every event (outbox_pending).
var soakTables = []string{"outbox_pending", "outbox", "deliveries", "inbox", "executions"}

// SoakConfig configures a soak.
type SoakConfig struct {
	// Binary is the intake executable run as ingress and processor.
	// Defaults to the running executable.
	Binary string
	// Duration of the load. Defaults to DefaultSoakDuration (30 minutes).
	Duration time.Duration
	// Load is the offered rate as a fraction of the ingress maximum measured
	// at the start. Defaults to DefaultSoakLoad (0.7).
	Load float64
	// Rate, when set, is the offered rate in requests per second, and no
	// saturation is measured.
	Rate float64
	// Payload in bytes. Defaults to DefaultSoakPayload (1 KiB).
	Payload int
	// Interval between reported rows. Defaults to DefaultSoakInterval (one
	// minute), or a tenth of Duration for runs shorter than ten minutes.
	Interval time.Duration
	// Connections of the saturating generator. Defaults to 64; the steady
	// load opens four times as many, so that it never waits for one.
	Connections int
	// PostgresSettings are server settings ("name=value") for the private
	// Postgres, after its own. Defaults to none: Postgres's defaults.
	PostgresSettings []string
	// DuplicateWindow is the streams' nats.stream.duplicate_window.
	// Defaults to the product's (config.DefaultDuplicateWindow, 2m).
	DuplicateWindow time.Duration
	// NATSSyncAlways runs NATS with sync_interval: always, as the chart,
	// compose and deploy/nats/intake.conf ship it (every write fsynced
	// before its PubAck); false, NATS's default (a sync every 2 minutes).
	NATSSyncAlways bool
	// Progress receives each row as it is measured. Defaults to discarding.
	Progress io.Writer
	Log      *slog.Logger
}

// WithDefaults returns c with its unset fields at their defaults.
func (c SoakConfig) WithDefaults() SoakConfig {
	c.Duration = cmp.Or(c.Duration, DefaultSoakDuration)
	c.Load = cmp.Or(c.Load, DefaultSoakLoad)
	c.Payload = cmp.Or(c.Payload, DefaultSoakPayload)
	c.Connections = cmp.Or(c.Connections, 64)
	if c.Interval == 0 {
		c.Interval = DefaultSoakInterval
		if c.Duration < soakLongRun {
			c.Interval = c.Duration / 10
		}
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c SoakConfig) validate() error {
	switch {
	case c.Duration < time.Minute:
		return fmt.Errorf("bench soak: Duration %s: at least a minute", c.Duration)
	case c.Interval < 5*time.Second || c.Interval > c.Duration:
		return fmt.Errorf("bench soak: Interval %s: between 5s and Duration", c.Interval)
	case c.Load <= 0 || c.Load > 1:
		return fmt.Errorf("bench soak: Load %.2f: in (0, 1]", c.Load)
	case c.Rate < 0:
		return fmt.Errorf("bench soak: Rate %.0f: negative", c.Rate)
	case c.DuplicateWindow < 0:
		return fmt.Errorf("bench soak: DuplicateWindow %s: negative", c.DuplicateWindow)
	}
	return nil
}

// SoakRow is one interval.
type SoakRow struct {
	At         time.Duration  `json:"at_ns"`               // since the load started, at the interval's end
	Accepted   float64        `json:"accepted_per_second"` // 2xx answers received in the interval
	Behind     float64        `json:"behind_s"`            // the load's delay behind its schedule: ingress answers slower than offered
	Failed     int            `json:"failed"`
	FailedWhy  map[string]int `json:"failed_by_reason,omitempty"`
	IngressP50 float64        `json:"ingress_p50_ms"`
	IngressP99 float64        `json:"ingress_p99_ms"`
	E2EP99     float64        `json:"e2e_p99_ms"`
	// E2EStoredP99 ends where NATS stored the processed message on
	// INTAKE_OUT (its timestamp), not where the watcher received it: what
	// is left of E2EP99 is the watcher's own delay on a busy machine.
	E2EStoredP99 float64     `json:"e2e_stored_p99_ms"`
	E2ELate      int         `json:"e2e_late"` // events not on INTAKE_OUT within soakE2EWait
	Processed    float64     `json:"processed_per_second"`
	Lag          uint64      `json:"processor_lag"` // INTAKE_IN: pending + ack pending
	LagAge       float64     `json:"processor_lag_age_s"`
	Relayed      float64     `json:"outbox_relayed"` // rows the relay published, not the processor
	Pending      int64       `json:"outbox_pending"`
	PendingAge   float64     `json:"outbox_pending_age_s"`
	IngressRSS   float64     `json:"ingress_rss_mib"`
	ProcRSS      float64     `json:"processor_rss_mib"`
	NATSRSS      float64     `json:"nats_rss_mib"` // not judged: its duplicate windows fill for nats.stream.duplicate_window
	Tables       []SoakTable `json:"tables"`
	// Checkpoints Postgres began in the interval (timed and requested) and
	// the WAL it wrote: a checkpoint's writes and the full-page images
	// after it are the load that most often shows as a latency spike.
	Checkpoints int64   `json:"checkpoints"`
	WALMiB      float64 `json:"wal_mib"`
	Warnings    int     `json:"warnings"` // WARN and ERROR lines the roles logged so far
	// CPU is each process's share of one core over the interval, in
	// percent (the machine has runtime.NumCPU() of them): with every role,
	// Postgres and the generator on one host, a latency that grows while
	// the rates hold is first a question of who took the cores.
	CPU SoakCPU         `json:"cpu_percent"`
	e2e []time.Duration // kept for the verdict
}

// SoakCPU is CPU use over an interval, in percent of one core.
type SoakCPU struct {
	Ingress   float64 `json:"ingress"`
	Processor float64 `json:"processor"`
	NATS      float64 `json:"nats"`
	Postgres  float64 `json:"postgres"` // the postmaster and its children
	Bench     float64 `json:"bench"`    // this process: the load generator and the INTAKE_OUT watcher
	Idle      float64 `json:"idle"`     // the machine's idle time, all cores
}

// cpuTimes is the CPU time each process has used so far.
type cpuTimes struct {
	ingress, processor, nats, postgres, bench, idle time.Duration
	at                                              time.Time
}

// readCPU reads the processes' CPU times from /proc; a process that cannot
// be read counts 0 (the row shows it).
func (s *soakRun) readCPU() cpuTimes {
	t := cpuTimes{at: time.Now()}
	t.ingress, t.processor, t.nats = s.ing.cpu(), s.proc.cpu(), s.natsd.cpu()
	t.postgres, _ = postgresCPU(s.pgPID)
	t.bench = pidCPU(os.Getpid())
	t.idle = machineIdle()
	return t
}

func (t cpuTimes) since(prev cpuTimes) SoakCPU {
	el := t.at.Sub(prev.at)
	if el <= 0 {
		return SoakCPU{}
	}
	pct := func(a, b time.Duration) float64 { return 100 * float64(a-b) / float64(el) }
	return SoakCPU{Ingress: pct(t.ingress, prev.ingress), Processor: pct(t.processor, prev.processor),
		NATS: pct(t.nats, prev.nats), Postgres: pct(t.postgres, prev.postgres), Bench: pct(t.bench, prev.bench),
		Idle: pct(t.idle, prev.idle)}
}

// SoakTable is one hot table at the end of an interval.
type SoakTable struct {
	Name       string `json:"name"`
	DeadTuples int64  `json:"dead_tuples"`
	Bytes      int64  `json:"total_bytes"`
	Vacuums    int64  `json:"autovacuums"`
}

// SoakReport is a soak's result.
type SoakReport struct {
	Started     time.Time     `json:"started"`
	Machine     string        `json:"machine"`
	Config      string        `json:"config"`
	Saturation  float64       `json:"ingress_max_per_second,omitempty"`
	Offered     float64       `json:"offered_per_second"`
	Rows        []SoakRow     `json:"rows"`
	Verdict     SoakVerdict   `json:"verdict"`
	WarningLogs []string      `json:"warning_logs,omitempty"` // the first few
	Took        time.Duration `json:"took"`
}

// Soak runs the soak and returns its report; the verdict is in
// SoakReport.Verdict.
func Soak(ctx context.Context, c SoakConfig) (*SoakReport, error) {
	c = c.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		c.Binary = exe
	}
	rep := &SoakReport{Started: time.Now(), Machine: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())}
	dir, err := os.MkdirTemp("", "intake-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	c.Log.Info("starting private Postgres (fsync on)", "dir", dir)
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "pg"), Settings: c.PostgresSettings})
	if err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = pg.Stop(sctx)
	}()
	natsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// NATS runs as a process of its own, as in production: embedded here,
	// it shared the harness's heap — its duplicate windows (about 2 GB at
	// 4,000/s) and the load generator's garbage — and its PubAcks waited
	// for that heap's collections.
	natsArgs := []string{"nats", "--addr", natsAddr, "--store-dir", filepath.Join(dir, "nats")}
	if c.NATSSyncAlways {
		natsArgs = append(natsArgs, "--sync-always")
	}
	natsd, err := startChild("nats", c.Binary, filepath.Join(dir, "nats.log"), nil, natsArgs...)
	if err != nil {
		return nil, err
	}
	defer natsd.stop()
	natsURL := "nats://" + natsAddr
	nc, err := connectNATS(ctx, natsd, natsURL)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if err := createDB(ctx, pg.URL("postgres"), "soak"); err != nil {
		return nil, err
	}
	dbURL := pg.URL("soak")
	if err := store.Migrate(ctx, dbURL, nil); err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, dbURL, 2)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	streamCfg := config.Stream{DuplicateWindow: c.DuplicateWindow}.WithDefaults()
	if err := stream.Ensure(ctx, js, streamCfg); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "intake.yaml")
	// The generator is one address standing for a fleet of senders: the
	// per-address limit on unverified requests would answer it 429 whenever
	// ingress is slow enough that 40 wait for their signature check.
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`nats: {url: %q, stream: {duplicate_window: %s}}
postgres: {url: %q}
ingress: {client_rate_limit: {per_second: -1}}
integrations:
  - {name: bench, provider: standard, tenant: bench, account: a, secrets: [%q], max_body_bytes: 1048576}
`, natsURL, streamCfg.DuplicateWindow, dbURL, benchSecret)), 0o600); err != nil {
		return nil, err
	}

	// The roles log JSON at warn: every line they write is a warning or
	// worse, counted by soakWarnings.
	start := func(name string, args ...string) (*child, string, error) {
		addr, err := freeAddr()
		if err != nil {
			return nil, "", err
		}
		ch, err := startChild(name, c.Binary, filepath.Join(dir, name+".log"), nil,
			append([]string{name, "--config", cfgPath, "--http-addr", addr, "--log-format", "json", "--log-level", "warn"}, args...)...)
		if err != nil {
			return nil, "", err
		}
		return ch, "http://" + addr, nil
	}
	ing, ingBase, err := start("ingress")
	if err != nil {
		return nil, err
	}
	defer ing.stop()
	if err := ing.waitReady(ctx, ingBase+"/readyz"); err != nil {
		return nil, err
	}
	proc, procBase, err := start("processor")
	if err != nil {
		return nil, err
	}
	defer proc.stop()
	if err := proc.waitReady(ctx, procBase+"/healthz"); err != nil {
		return nil, err
	}

	url := ingBase + "/webhooks/bench"
	signing := provider.Config{Provider: "standard", Secrets: []string{benchSecret}}
	rep.Offered = c.Rate
	if rep.Offered == 0 {
		c.Log.Info("saturating ingress to set the load", "for", soakSaturation)
		sat, err := generate(ctx, newClient(c.Connections), newRequests(url, signing, c.Payload, "sat"), c.Connections, soakSaturation, 0, false)
		if err != nil {
			return nil, err
		}
		rep.Saturation = sat.rate()
		rep.Offered = c.Load * rep.Saturation
	}
	rep.Config = fmt.Sprintf("%s at %.0f/s (%s), %d-byte payloads, rows every %s, duplicate window %s", c.Duration, rep.Offered, loadNote(c, rep), c.Payload, c.Interval, streamCfg.DuplicateWindow)
	in, err := js.Consumer(ctx, envelope.StreamIn, stream.ProcessorDurable(""))
	if err != nil {
		return nil, fmt.Errorf("processor consumer: %w", err)
	}
	if err := soakDrained(ctx, in, st, 5*time.Minute); err != nil {
		return nil, err
	}
	ot, stopOut, err := watchOut(ctx, js)
	if err != nil {
		return nil, err
	}
	defer stopOut()

	s := &soakRun{c: c, rep: rep, js: js, in: in, st: st, ot: ot, ing: ing, proc: proc, natsd: natsd, procBase: procBase, pgPID: pg.PID(),
		logs: []string{filepath.Join(dir, "ingress.log"), filepath.Join(dir, "processor.log")}}
	c.Log.Info("soak started", "offered_per_second", int(rep.Offered), "duration", c.Duration)
	if err := s.run(ctx, url, signing); err != nil {
		return rep, err
	}
	rep.Verdict = judgeSoak(rep.Rows, windowRows(c.Duration, c.Interval, int(c.Duration/c.Interval)))
	rep.WarningLogs = s.firstWarnings
	rep.Took = time.Since(rep.Started).Round(time.Second)
	return rep, nil
}

func loadNote(c SoakConfig, rep *SoakReport) string {
	if rep.Saturation == 0 {
		return "--rate"
	}
	return fmt.Sprintf("%.0f%% of the ingress maximum %.0f/s", 100*c.Load, rep.Saturation)
}

// soakDrained waits until the processor consumer has nothing pending and
// the outbox pending list is empty: the saturation's backlog is not the
// soak's.
func soakDrained(ctx context.Context, in jetstream.Consumer, st *store.Store, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		info, err := in.Info(ctx)
		if err != nil {
			return err
		}
		n, _, err := st.OutboxLag(ctx)
		if err != nil {
			return err
		}
		if info.NumPending == 0 && info.NumAckPending == 0 && n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("bench soak: the saturation's backlog was not processed in %s", wait)
}

// soakRun is a soak in progress.
type soakRun struct {
	c             SoakConfig
	rep           *SoakReport
	js            jetstream.JetStream
	in            jetstream.Consumer
	st            *store.Store
	ot            *outTimes
	ing, proc     *child
	natsd         *child
	procBase      string
	logs          []string
	firstWarnings []string
	lastProc      soakCounters
	lastPG        pgCounters
	pgPID         int
	lastCPU       cpuTimes
}

// run offers the load for the whole duration without a pause (steady) and
// samples at every interval's end; each interval's row is completed (its
// requests, their events' end-to-end latencies) while the load goes on.
func (s *soakRun) run(ctx context.Context, url string, signing provider.Config) (err error) {
	n := int(s.c.Duration / s.c.Interval)
	w := windowRows(s.c.Duration, s.c.Interval, n)
	conns := 4 * s.c.Connections
	if s.lastProc, err = scrapeCounters(ctx, s.procBase); err != nil {
		return err
	}
	if s.lastPG, err = readPGCounters(ctx, s.st); err != nil {
		return err
	}
	s.lastCPU = s.readCPU()
	s.printHeader()
	load := newSteady(s.c.Interval, n, s.rep.Offered)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	rows := make(chan SoakRow, n)
	defer func() {
		close(rows)
		if err != nil {
			cancel() // the load and the rows still waited for
		}
		wg.Wait()
		cancel()
	}()
	genErr := make(chan error, 1)
	wg.Go(func() {
		genErr <- load.run(ctx, newClient(conns), newRequests(url, signing, s.c.Payload, "soak"), conns)
	})
	wg.Go(func() {
		for i := 0; ; i++ {
			row, ok := <-rows
			if !ok {
				return
			}
			res, ok := load.wait(ctx, i)
			if !ok {
				continue
			}
			row.complete(res)
			row.E2EP99, row.E2EStoredP99, row.E2ELate, row.e2e = s.endToEnd(ctx, res.Done)
			if i >= w && i < n-w {
				row.e2e = nil // only the compared windows' latencies are kept
			}
			s.rep.Rows = append(s.rep.Rows, row)
			s.printRow(row)
		}
	})
	var lastAcc int64
	for i := range n {
		end := load.start.Add(time.Duration(i+1) * s.c.Interval)
	wait:
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case err := <-genErr:
				if err != nil {
					return err
				}
				genErr = nil // done: its last requests finish just after the last interval's end
			case <-time.After(time.Until(end)):
				break wait
			}
		}
		row, err := s.sample(ctx, time.Since(load.start))
		if err != nil {
			return err
		}
		acc, behind := load.progress()
		row.Behind = behind.Seconds()
		row.Accepted = float64(acc-lastAcc) / s.c.Interval.Seconds()
		lastAcc = acc
		rows <- row
	}
	return nil
}

// steady is an open-loop load at a fixed rate: request i is due at
// start+i/rate and its latency counts from then (no coordinated
// omission), results kept by the interval the request was due in.
type steady struct {
	start    time.Time
	interval time.Duration
	n        int
	rate     float64
	mu       sync.Mutex
	next     int64 // the next request's index
	answered int64 // 2xx answers so far, whatever interval they were due in
	res      []loadResult
	claimed  []int
	finished []int
	sealed   int // intervals whose requests have all been claimed
}

func newSteady(interval time.Duration, n int, rate float64) *steady {
	return &steady{start: time.Now(), interval: interval, n: n, rate: rate,
		res: make([]loadResult, n), claimed: make([]int, n), finished: make([]int, n)}
}

func (l *steady) run(ctx context.Context, client *http.Client, reqs *requests, conns int) error {
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	for range conns {
		wg.Go(func() {
			for ctx.Err() == nil {
				i, k, due, ok := l.claim()
				if !ok {
					return
				}
				if w := time.Until(due); w > 0 {
					select {
					case <-ctx.Done():
						l.finish(k, nil, "", 0, "")
						return
					case <-time.After(w):
					}
				}
				req, id, err := reqs.make(i)
				if err != nil {
					once.Do(func() { firstErr = err })
					l.finish(k, nil, "", 0, "")
					return
				}
				resp, err := client.Do(req.WithContext(ctx))
				if err != nil {
					l.finish(k, nil, "", 0, failure(err))
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				now := time.Now()
				if resp.StatusCode != http.StatusOK {
					l.finish(k, nil, "", 0, fmt.Sprintf("HTTP %d", resp.StatusCode))
					continue
				}
				l.finish(k, &now, id, now.Sub(due), "")
			}
		})
	}
	wg.Wait()
	l.seal(l.n)
	return firstErr
}

// claim takes the next request: its index, interval and due time; false
// once the run's end is due. Requests are claimed in order, so a claim in
// interval k means every earlier interval has all of its claims.
func (l *steady) claim() (i int64, k int, due time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i = l.next
	l.next++
	due = l.start.Add(time.Duration(float64(i) / l.rate * float64(time.Second)))
	k = int(due.Sub(l.start) / l.interval)
	if k >= l.n {
		l.sealed = l.n
		return 0, 0, due, false
	}
	l.claimed[k]++
	l.sealed = max(l.sealed, k)
	return i, k, due, true
}

// progress is the number of 2xx answers so far, and how far the load is
// behind its schedule: every connection is waiting for an answer while
// the next request is overdue.
func (l *steady) progress() (answered int64, behind time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	due := l.start.Add(time.Duration(float64(l.next) / l.rate * float64(time.Second)))
	return l.answered, max(time.Since(due), 0)
}

func (l *steady) seal(k int) {
	l.mu.Lock()
	l.sealed = max(l.sealed, k)
	l.mu.Unlock()
}

// finish records a request of interval k: done at *at (event id, latency),
// or failed for why ("" when it was never sent).
func (l *steady) finish(k int, at *time.Time, id string, lat time.Duration, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.finished[k]++
	r := &l.res[k]
	switch {
	case at != nil:
		l.answered++
		r.OK++
		r.Latencies = append(r.Latencies, lat)
		if r.Done == nil {
			r.Done = map[string]time.Time{}
		}
		r.Done[id] = *at
	case why != "":
		r.Failed++
		if r.Why == nil {
			r.Why = map[string]int{}
		}
		r.Why[why]++
	}
}

// wait returns interval k's results once every request due in it has an
// answer (a request gives up after the client's timeout), and forgets
// them; false when ctx ended first.
func (l *steady) wait(ctx context.Context, k int) (loadResult, bool) {
	for {
		l.mu.Lock()
		if l.sealed > k && l.finished[k] == l.claimed[k] {
			r := l.res[k]
			l.res[k] = loadResult{}
			l.mu.Unlock()
			r.Elapsed = l.interval
			return r, true
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return loadResult{}, false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sample measures, at an interval's end, all but the interval's requests
// (SoakRow.complete) and end to end.
func (s *soakRun) sample(ctx context.Context, at time.Duration) (SoakRow, error) {
	row := SoakRow{At: at.Round(time.Second)}
	cur, err := scrapeCounters(ctx, s.procBase)
	if err != nil {
		return row, err
	}
	secs := s.c.Interval.Seconds()
	row.Processed = (cur.messages - s.lastProc.messages) / secs
	row.Relayed = cur.relayed - s.lastProc.relayed
	s.lastProc = cur
	info, err := s.in.Info(ctx)
	if err != nil {
		return row, err
	}
	row.Lag = info.NumPending + uint64(info.NumAckPending)
	if row.Lag > 0 {
		// The oldest unprocessed message is the one after the ack floor.
		if str, err := s.js.Stream(ctx, envelope.StreamIn); err == nil {
			if m, err := str.GetMsg(ctx, info.AckFloor.Stream+1); err == nil {
				row.LagAge = time.Since(m.Time).Seconds()
			}
		}
	}
	n, age, err := s.st.OutboxLag(ctx)
	if err != nil {
		return row, err
	}
	row.Pending, row.PendingAge = n, age.Seconds()
	row.IngressRSS, row.ProcRSS, row.NATSRSS = s.ing.rss(), s.proc.rss(), s.natsd.rss()
	if row.Tables, err = soakTableStats(ctx, s.st); err != nil {
		return row, err
	}
	pg, err := readPGCounters(ctx, s.st)
	if err != nil {
		return row, err
	}
	row.Checkpoints = pg.checkpoints - s.lastPG.checkpoints
	row.WALMiB = float64(pg.walBytes-s.lastPG.walBytes) / (1 << 20)
	s.lastPG = pg
	cpu := s.readCPU()
	row.CPU, s.lastCPU = cpu.since(s.lastCPU), cpu
	row.Warnings, s.firstWarnings = soakWarnings(s.logs)
	return row, nil
}

// complete adds the latencies and failures of the requests due in the
// interval to the row. (Its accepted rate counts the 2xx answers received
// during the interval: while ingress cannot keep up, requests due in it are
// answered later, and the rate shows it.)
func (r *SoakRow) complete(res loadResult) {
	r.Failed, r.FailedWhy = res.Failed, res.Why
	r.IngressP50, r.IngressP99 = millis(res.pct(.5)), millis(res.pct(.99))
}

// endToEnd waits (up to soakE2EWait) for an interval's events on
// INTAKE_OUT, returns their p99 and how many were late, and forgets them:
// a long soak would otherwise keep every event id.
func (s *soakRun) endToEnd(ctx context.Context, done map[string]time.Time) (p99, storedP99 float64, late int, lat []time.Duration) {
	res := endToEnd(ctx, done, s.ot, soakE2EWait)
	var stored loadResult
	s.ot.mu.Lock()
	for id, t2xx := range done {
		if at, ok := s.ot.at[id]; ok && !at.stored.IsZero() {
			stored.Latencies = append(stored.Latencies, max(at.stored.Sub(t2xx), 0))
		}
		delete(s.ot.at, id)
	}
	s.ot.mu.Unlock()
	late = len(done) - len(res.Latencies)
	lat = res.Latencies
	for range late {
		lat = append(lat, soakE2EWait)
		stored.Latencies = append(stored.Latencies, soakE2EWait)
	}
	ms := func(r loadResult) float64 { return float64(r.pct(.99).Microseconds()) / 1000 }
	return ms(loadResult{Latencies: lat}), ms(stored), late, lat
}

// soakCounters are the processor's counters a row reports.
type soakCounters struct {
	messages float64 // intake_processor_messages_total
	relayed  float64 // intake_outbox_relayed_total
}

func scrapeCounters(ctx context.Context, base string) (soakCounters, error) {
	fams, err := scrape.Families(ctx, base+"/metrics")
	if err != nil {
		return soakCounters{}, err
	}
	var c soakCounters
	c.messages, _ = scrape.Sum(fams, "intake_processor_messages_total", nil)
	c.relayed, _ = scrape.Sum(fams, "intake_outbox_relayed_total", nil)
	return c, nil
}

// connectNATS connects to the NATS child once it listens.
func connectNATS(ctx context.Context, natsd *child, url string) (*nats.Conn, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		nc, err := nats.Connect(url)
		if err == nil {
			return nc, nil
		}
		select {
		case err := <-natsd.done:
			natsd.done <- err
			return nil, fmt.Errorf("nats exited during start: %v (log %s)", err, natsd.log.Name())
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("nats not listening on %s after a minute: %w", url, err)
		}
	}
}

// pgCounters are Postgres's cumulative counters a row reports the growth of.
type pgCounters struct {
	checkpoints int64 // begun, timed and requested
	walBytes    int64 // WAL position, in bytes from the start
}

func readPGCounters(ctx context.Context, st *store.Store) (pgCounters, error) {
	var c pgCounters
	err := st.Pool().QueryRow(ctx, `
		SELECT checkpoints_timed + checkpoints_req, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint
		FROM pg_stat_bgwriter`).Scan(&c.checkpoints, &c.walBytes)
	if err != nil {
		return c, fmt.Errorf("bench soak: checkpoint and WAL counters: %w", err)
	}
	return c, nil
}

// soakTableStats reads the hot tables' dead rows (the statistics
// collector's estimate), total size (indexes and TOAST included) and
// autovacuum count, summed over a partitioned table's partitions.
func soakTableStats(ctx context.Context, st *store.Store) ([]SoakTable, error) {
	rows, err := st.Pool().Query(ctx, `
		SELECT t.name, coalesce(sum(s.n_dead_tup), 0)::bigint, sum(pg_total_relation_size(p.relid))::bigint,
			coalesce(sum(s.autovacuum_count), 0)::bigint
		FROM unnest($1::text[]) WITH ORDINALITY AS t(name, i)
		-- pg_partition_tree lists nothing for a table that is not partitioned.
		CROSS JOIN LATERAL (SELECT relid FROM pg_partition_tree(('intake.' || t.name)::regclass)
			UNION ALL SELECT ('intake.' || t.name)::regclass
			WHERE NOT EXISTS (SELECT 1 FROM pg_partition_tree(('intake.' || t.name)::regclass))) p
		LEFT JOIN pg_stat_user_tables s ON s.relid = p.relid
		GROUP BY t.name, t.i
		ORDER BY t.i`, soakTables)
	if err != nil {
		return nil, fmt.Errorf("bench soak: table statistics: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (SoakTable, error) {
		var t SoakTable
		err := r.Scan(&t.Name, &t.DeadTuples, &t.Bytes, &t.Vacuums)
		return t, err
	})
}

// soakWarnings counts the WARN and ERROR lines in the roles' JSON logs and
// returns the first few. A line that is not JSON (a panic's trace) counts
// too.
func soakWarnings(paths []string) (int, []string) {
	n := 0
	var first []string
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			var rec struct {
				Level string `json:"level"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Level != "WARN" && rec.Level != "ERROR" {
				continue
			}
			n++
			if len(first) < 10 {
				first = append(first, filepath.Base(p)+": "+line)
			}
		}
		f.Close()
	}
	return n, first
}

// windowRows is how many rows the verdict compares at each end: those of
// soakWindow for a run of soakLongRun or more, a fifth of the rows for a
// shorter one; at least one.
func windowRows(d, interval time.Duration, rows int) int {
	w := rows / 5
	if d >= soakLongRun {
		w = int(soakWindow / interval)
	}
	return max(min(w, rows/2), 1)
}

// SoakVerdict compares the last window of a soak with the first.
type SoakVerdict struct {
	Window      int      `json:"window_rows"`
	Accepted    float64  `json:"accepted_last_over_first"`  // >= 0.9
	Processed   float64  `json:"processed_last_over_first"` // >= 0.9
	E2EP99      float64  `json:"e2e_p99_last_over_first"`   // <= 1.5
	IngressRSS  float64  `json:"ingress_rss_last_over_first"`
	ProcRSS     float64  `json:"processor_rss_last_over_first"` // each <= 1.2
	Warnings    int      `json:"warnings"`                      // 0
	DeadBounded bool     `json:"dead_tuples_bounded"`
	MaxDead     int64    `json:"max_dead_tuples_outbox_pending"`
	Failed      []string `json:"failed,omitempty"`
	OK          bool     `json:"ok"`
}

// judgeSoak compares the last w rows with the first w.
func judgeSoak(rows []SoakRow, w int) SoakVerdict {
	v := SoakVerdict{Window: w}
	if len(rows) < 2 {
		v.Failed = []string{"fewer than two rows"}
		return v
	}
	w = max(min(w, len(rows)/2), 1) // a run cut short has fewer rows
	v.Window = w
	first, last := rows[:w], rows[len(rows)-w:]
	mean := func(rs []SoakRow, f func(SoakRow) float64) float64 {
		var s float64
		for _, r := range rs {
			s += f(r)
		}
		return s / float64(len(rs))
	}
	ratio := func(f func(SoakRow) float64) float64 {
		a := mean(first, f)
		if a == 0 {
			return 0
		}
		return mean(last, f) / a
	}
	e2e := func(rs []SoakRow) float64 {
		var all []time.Duration
		for _, r := range rs {
			all = append(all, r.e2e...)
		}
		return loadResult{Latencies: all}.pct(.99).Seconds()
	}
	v.Accepted = ratio(func(r SoakRow) float64 { return r.Accepted })
	v.Processed = ratio(func(r SoakRow) float64 { return r.Processed })
	if a := e2e(first); a > 0 {
		v.E2EP99 = e2e(last) / a
	}
	// Memory is compared by each window's peak: a sample falls anywhere in
	// the garbage collector's sawtooth (±30 % from one minute to the next
	// on this machine), a peak does not, and growth raises it.
	peakRSS := func(rs []SoakRow, f func(SoakRow) float64) float64 {
		var m float64
		for _, r := range rs {
			m = max(m, f(r))
		}
		return m
	}
	ing := func(r SoakRow) float64 { return r.IngressRSS }
	proc := func(r SoakRow) float64 { return r.ProcRSS }
	v.IngressRSS = peakRSS(last, ing) / peakRSS(first, ing)
	v.ProcRSS = peakRSS(last, proc) / peakRSS(first, proc)
	v.Warnings = rows[len(rows)-1].Warnings
	// Dead rows are bounded when the last window's peak is within twice the
	// first's (plus slack for an autovacuum visit that falls just before or
	// after a sample), table by table.
	v.DeadBounded = true
	for i, t := range rows[0].Tables {
		peak := func(rs []SoakRow) int64 {
			var m int64
			for _, r := range rs {
				m = max(m, r.Tables[i].DeadTuples)
			}
			return m
		}
		if t.Name == "outbox_pending" {
			v.MaxDead = peak(rows)
		}
		if peak(last) > 2*peak(first)+10000 {
			v.DeadBounded = false
			v.Failed = append(v.Failed, fmt.Sprintf("dead tuples of %s grew (%d, first %d)", t.Name, peak(last), peak(first)))
		}
	}
	check := func(ok bool, what string) {
		if !ok {
			v.Failed = append(v.Failed, what)
		}
	}
	check(v.Accepted >= 0.9, fmt.Sprintf("accepted rate %.2f of the first window", v.Accepted))
	check(v.Processed >= 0.9, fmt.Sprintf("processed rate %.2f of the first window", v.Processed))
	check(v.E2EP99 <= 1.5, fmt.Sprintf("end-to-end p99 %.2fx the first window", v.E2EP99))
	check(v.IngressRSS <= 1.2, fmt.Sprintf("ingress RSS %.2fx the first window", v.IngressRSS))
	check(v.ProcRSS <= 1.2, fmt.Sprintf("processor RSS %.2fx the first window", v.ProcRSS))
	check(v.Warnings == 0, fmt.Sprintf("%d warnings logged", v.Warnings))
	v.OK = len(v.Failed) == 0
	return v
}

// Line is the verdict in one line.
func (v SoakVerdict) Line() string {
	word := "PASS"
	if !v.OK {
		word = "FAIL"
	}
	s := fmt.Sprintf("soak %s: last %d rows / first %d: accepted %.2f (>= 0.9), processed %.2f (>= 0.9), e2e p99 %.2f (<= 1.5), RSS ingress %.2f processor %.2f (<= 1.2), warnings %d (0), outbox_pending dead tuples peak %d (bounded: %v)",
		word, v.Window, v.Window, v.Accepted, v.Processed, v.E2EP99, v.IngressRSS, v.ProcRSS, v.Warnings, v.MaxDead, v.DeadBounded)
	if len(v.Failed) > 0 {
		s += " — " + strings.Join(v.Failed, "; ")
	}
	return s
}

const soakHeader = "%8s %8s %6s %5s %8s %8s %9s %9s %6s %8s %8s %6s %6s %7s %6s %7s %7s %8s %9s %9s %9s %9s %9s %5s %7s %5s %22s\n"

func (s *soakRun) printHeader() {
	fmt.Fprintf(s.c.Progress, "# intake bench soak — %s — %s\n", s.rep.Machine, s.rep.Config)
	printSoakHeader(s.c.Progress)
}

func printSoakHeader(w io.Writer) {
	fmt.Fprintf(w, soakHeader, "at", "acc/s", "behind", "fail", "in p50", "in p99", "e2e p99", "st p99", "late", "proc/s", "lag", "lag s", "relay", "pending", "pend s",
		"ing MiB", "prc MiB", "nats MiB", "pend dead", "pend MiB", "outbx MiB", "deliv MiB", "inbox MiB", "ckpt", "WAL MiB", "warn", "cpu% in/prc/nats/pg/gen/idle")
}

func (s *soakRun) printRow(r SoakRow) { printSoakRow(s.c.Progress, r) }

func printSoakRow(w io.Writer, r SoakRow) {
	mib := func(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }
	t := map[string]SoakTable{}
	for _, x := range r.Tables {
		t[x.Name] = x
	}
	cpu := fmt.Sprintf("%.0f/%.0f/%.0f/%.0f/%.0f/%.0f", r.CPU.Ingress, r.CPU.Processor, r.CPU.NATS, r.CPU.Postgres, r.CPU.Bench, r.CPU.Idle)
	fmt.Fprintf(w, "%8s %8.0f %6.1f %5d %8.1f %8.1f %9.1f %9.1f %6d %8.0f %8d %6.1f %6.0f %7d %6.1f %7.0f %7.0f %8.0f %9d %9s %9s %9s %9s %5d %7.0f %5d %22s\n",
		r.At, r.Accepted, r.Behind, r.Failed, r.IngressP50, r.IngressP99, r.E2EP99, r.E2EStoredP99, r.E2ELate, r.Processed, r.Lag, r.LagAge, r.Relayed, r.Pending, r.PendingAge,
		r.IngressRSS, r.ProcRSS, r.NATSRSS, t["outbox_pending"].DeadTuples, mib(t["outbox_pending"].Bytes), mib(t["outbox"].Bytes),
		mib(t["deliveries"].Bytes), mib(t["inbox"].Bytes), r.Checkpoints, r.WALMiB, r.Warnings, cpu)
}

// Print writes the report as a table, or JSON.
func (r *SoakReport) Print(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "\nintake bench soak — %s — %s — took %s\n", r.Machine, r.Config, r.Took)
	printSoakHeader(w)
	for _, row := range r.Rows {
		printSoakRow(w, row)
	}
	if len(r.Rows) > 0 {
		fmt.Fprintln(w, "\ndead tuples / total MiB / autovacuums at the end:")
		for _, t := range r.Rows[len(r.Rows)-1].Tables {
			fmt.Fprintf(w, "  %-15s %10d %9.1f %5d\n", t.Name, t.DeadTuples, float64(t.Bytes)/(1<<20), t.Vacuums)
		}
	}
	why := map[string]int{}
	for _, row := range r.Rows {
		for k, v := range row.FailedWhy {
			why[k] += v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(why)) {
		fmt.Fprintf(w, "  failed requests, %s: %d\n", k, why[k])
	}
	for _, l := range r.WarningLogs {
		fmt.Fprintln(w, "  warning:", l)
	}
	_, err := fmt.Fprintln(w, r.Verdict.Line())
	return err
}
