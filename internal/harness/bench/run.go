package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
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

// Config configures a run.
type Config struct {
	// Quick measures 1 KiB payloads for 3s per stage: under a minute.
	Quick bool
	// Binary is the intake executable to run as ingress and processor.
	// Defaults to the running executable.
	Binary string
	// Duration of each measurement. Defaults to 10s (3s with Quick).
	Duration time.Duration
	// Connections of the load generator. Defaults to 64.
	Connections int
	// Payloads in bytes. Defaults to 1024 and 16384 (1024 with Quick).
	Payloads []int
	// ProfileDir, when set, receives CPU profiles (pprof) of ingress at
	// saturation and of the processor while it drains
	// (ingress-{payload}.pprof, processor-{payload}.pprof), and Postgres's
	// statements during the drain by time spent (postgres-{payload}.txt,
	// from pg_stat_statements).
	ProfileDir string
	// Durability runs only the comparison of JetStream's fsync policies
	// (durability.go) instead of the stages above.
	Durability bool
	// Replication runs only the comparison of a synchronous and an
	// asynchronous Postgres standby (replication.go).
	Replication bool
	// Processors, when set, runs only the processor-count stage
	// (procs.go): the same backlog drained by each of these numbers of
	// processor processes, e.g. 1, 2, 4.
	Processors []int
	// Prefill, when set, runs only the big-tables stage (prefill.go): one
	// processor on empty tables against one on tables that already hold
	// this many events' rows, and the purge's rate beside it.
	Prefill int
	// System runs only the whole-pipeline stage (system.go): `intake dev`
	// under a closed-loop load, CPU per event as deployed, against bare
	// HTTP.
	System bool
	// Dispatch runs only the dispatcher stage (dispatch.go): its
	// throughput against a bare HTTP client at each payload size, then the
	// outage and the kills.
	Dispatch bool
	// DispatchInFlight is the bench destinations' max_in_flight, and the
	// bare client's concurrency. Defaults to
	// config.DefaultDestinationMaxInFlight (16).
	DispatchInFlight int
	// DispatchMessages is each throughput pass's backlog and the kills'
	// backlog. Defaults to what lasts about Duration (a calibration of the
	// bare client, and the dispatcher's measured rate).
	DispatchMessages int
	// Outage is how long the outage scenario holds the destination down.
	// Defaults to DefaultOutage (5 min; DefaultQuickOutage, 5 s, with
	// Quick, whose retry schedule and breaker probe are the defaults / 60);
	// negative skips it.
	Outage time.Duration
	// DispatchKills is how many times the kill scenario kills the
	// dispatcher with SIGKILL. Defaults to DefaultDispatchKills (3; 1 with
	// Quick); negative skips it.
	DispatchKills int
	// DispatchRate is the messages a second published during the outage and
	// the kills. Defaults to DefaultDispatchRate (100).
	DispatchRate float64
	Log          *slog.Logger
}

// Figure is one measured number.
type Figure struct {
	Stage   string  `json:"stage"`
	Payload int     `json:"payload_bytes"`
	Rate    float64 `json:"per_second"`
	P50Ms   float64 `json:"p50_ms,omitempty"`
	P99Ms   float64 `json:"p99_ms,omitempty"`
	RSSMB   float64 `json:"peak_rss_mib,omitempty"`
	Note    string  `json:"note,omitempty"`
}

// Ratio compares two figures of the same run.
type Ratio struct {
	Name    string  `json:"name"`
	Payload int     `json:"payload_bytes"`
	Value   float64 `json:"value"`
	Target  string  `json:"target,omitempty"`
	Met     *bool   `json:"met,omitempty"`
}

// Report is a run's result.
type Report struct {
	Started  time.Time `json:"started"`
	Machine  string    `json:"machine"`
	Config   string    `json:"config"`
	Figures  []Figure  `json:"figures"`
	Ratios   []Ratio   `json:"ratios"`
	Duration string    `json:"duration"`
	// Postgres is the cluster's work per event during each processor
	// drain (pgcost.go).
	Postgres []PGCost `json:"postgres_per_event,omitempty"`
	// Deliveries are the dispatcher stage's scenarios, judged from the
	// receiver's record (dispatchfaults.go).
	Deliveries []DeliveryCheck `json:"dispatch_scenarios,omitempty"`
}

// benchSecret signs the benchmark's deliveries. Not one of the example's
// defaults: `intake ingress` refuses the secrets pkg/config/example.yaml publishes.
const benchSecret = "whsec_YmVuY2gtc2VjcmV0LW5vdC1hLWRlZmF1bHQ="

// benchEnvelopeKey signs the envelopes, as a deployment's envelope.keys
// does: ingress signs each delivery and the processor verifies it and
// hashes its body, so the stages measure the signed path.
const benchEnvelopeKey = "bench-envelope-key-0123456789abcdef-not-a-default"

// Run measures everything and returns the report.
func Run(ctx context.Context, c Config) (*Report, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now(), Machine: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()),
		Config: fmt.Sprintf("%s per stage, %d connections, payloads %v", c.Duration, c.Connections, c.Payloads)}

	dir, err := os.MkdirTemp("", "intake-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if c.Durability || c.Replication {
		run, what := runDurability, "durability"
		if c.Replication {
			run, what = runReplication, "replication"
		}
		rep.Config += ", " + what + " comparison"
		return eachPayload(rep, c.Payloads, func(size int) error { return run(ctx, c, rep, dir, size) })
	}
	if c.System {
		bareAddr, bare, err := c.startBareChild(ctx, dir)
		if err != nil {
			return nil, err
		}
		defer bare.stop()
		rep.Config += ", the system as deployed (intake dev)"
		return eachPayload(rep, c.Payloads, func(size int) error { return runSystem(ctx, c, rep, dir, bareAddr, bare, size) })
	}
	pg, stopPG, err := c.startPostgres(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer stopPG()

	if c.Dispatch {
		rep.Config += fmt.Sprintf(", the dispatcher: max_in_flight %d, outage %s, %d kills, %.0f messages/s during them",
			c.DispatchInFlight, max(c.Outage, 0), max(c.DispatchKills, 0), c.DispatchRate)
		return runDispatch(ctx, c, rep, dir, pg)
	}
	if c.Prefill > 0 {
		rep.Config += fmt.Sprintf(", %d events' rows pre-filled", c.Prefill)
		return eachPayload(rep, c.Payloads, func(size int) error { return runPrefill(ctx, c, rep, dir, pg, size) })
	}
	if len(c.Processors) > 0 {
		rep.Config += fmt.Sprintf(", processor counts %v", c.Processors)
		return eachPayload(rep, c.Payloads, func(size int) error { return runProcessors(ctx, c, rep, dir, pg, size) })
	}
	bareAddr, stopBare, err := c.startBare(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer stopBare()
	return eachPayload(rep, c.Payloads, func(size int) error { return runPayload(ctx, c, rep, dir, pg, bareAddr, size) })
}

// withDefaults fills in what c leaves unset.
func (c Config) withDefaults() (Config, error) {
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
		switch {
		case c.Quick:
			c.Duration = 3 * time.Second
		case c.System:
			c.Duration = 20 * time.Second // the load of the figures issue 35 quotes
		}
	}
	if c.Connections == 0 {
		c.Connections = 64
	}
	if c.DispatchInFlight == 0 {
		c.DispatchInFlight = config.DefaultDestinationMaxInFlight
	}
	if c.Outage == 0 {
		c.Outage = DefaultOutage
		if c.Quick {
			c.Outage = DefaultQuickOutage
		}
	}
	if c.DispatchKills == 0 {
		c.DispatchKills = DefaultDispatchKills
		if c.Quick {
			c.DispatchKills = 1
		}
	}
	if c.DispatchRate == 0 {
		c.DispatchRate = DefaultDispatchRate
	}
	if len(c.Payloads) == 0 {
		c.Payloads = []int{1024, 16384}
		if c.Quick {
			c.Payloads = []int{1024}
		}
	}
	if c.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return c, err
		}
		c.Binary = exe
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// validate refuses bad processor counts, a negative prefill, and more than
// one of the runs that replace the stages.
func (c Config) validate() error {
	if err := checkProcessors(c.Processors); err != nil {
		return err
	}
	modes := 0
	for _, on := range []bool{len(c.Processors) > 0, c.Durability, c.Replication, c.Prefill > 0, c.System, c.Dispatch} {
		if on {
			modes++
		}
	}
	if modes > 1 {
		return errors.New("bench: processor counts, durability, replication, prefill, system and dispatch are separate runs: choose one")
	}
	if c.Dispatch && (c.DispatchInFlight < 1 || c.DispatchInFlight > config.MaxDestinationMaxInFlight) {
		return fmt.Errorf("bench: --max-in-flight must be 1..%d", config.MaxDestinationMaxInFlight)
	}
	if c.DispatchMessages < 0 || c.DispatchRate < 0 {
		return errors.New("bench: the dispatcher's messages and rate must be positive")
	}
	if c.Prefill < 0 {
		return errors.New("bench: --prefill must be positive")
	}
	return nil
}

// eachPayload runs one payload size after another, then says how long the
// whole run took. On an error the report keeps what was measured so far.
func eachPayload(rep *Report, sizes []int, run func(size int) error) (*Report, error) {
	for _, size := range sizes {
		if err := run(size); err != nil {
			return rep, fmt.Errorf("payload %d: %w", size, err)
		}
	}
	rep.Duration = time.Since(rep.Started).Round(time.Second).String()
	return rep, nil
}

// startPostgres starts the private Postgres cluster every stage shares,
// with pg_stat_statements when profiling (ProfileDir, created here).
func (c Config) startPostgres(ctx context.Context, dir string) (pg *pgcluster.Cluster, stop func(), err error) {
	c.Log.Info("starting private Postgres (fsync on)", "dir", dir)
	pgOpts := pgcluster.Options{Dir: filepath.Join(dir, "pg")}
	if c.ProfileDir != "" {
		if err := os.MkdirAll(c.ProfileDir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("profile dir: %w", err)
		}
		// Postgres's side of the processor drain, by statement.
		pgOpts.Settings = []string{"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all"}
	}
	pg, err = pgcluster.Start(ctx, pgOpts)
	if err != nil {
		return nil, nil, err
	}
	return pg, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = pg.Stop(sctx)
	}, nil
}

// startBare starts reference (a), the bare HTTP server, as its own
// process, and returns its address once it answers.
func (c Config) startBare(ctx context.Context, dir string) (addr string, stop func(), err error) {
	addr, bare, err := c.startBareChild(ctx, dir)
	if err != nil {
		return "", nil, err
	}
	return addr, bare.stop, nil
}

// startBareChild is startBare with the process, whose CPU time the system
// stage reads.
func (c Config) startBareChild(ctx context.Context, dir string) (addr string, bare *child, err error) {
	addr, err = freeAddr()
	if err != nil {
		return "", nil, err
	}
	bare, err = startChild("bare-http", c.Binary, filepath.Join(dir, "bare.log"), nil, "bench", "bare-http", "--addr", addr)
	if err != nil {
		return "", nil, err
	}
	if err := bare.waitReady(ctx, "http://"+addr+"/"); err != nil {
		bare.stop()
		return "", nil, err
	}
	return addr, bare, nil
}

// runPayload measures every stage for one payload size, in a fresh NATS
// store and database.
func runPayload(ctx context.Context, c Config, rep *Report, dir string, pg *pgcluster.Cluster, bareAddr string, size int) error {
	p := newPayloadRun(c, rep, dir, size)
	defer p.stop()
	if err := p.start(ctx, pg); err != nil {
		return err
	}
	if err := p.saturate(ctx, bareAddr); err != nil {
		return err
	}
	if err := p.rawPublish(ctx); err != nil {
		return err
	}
	// (c) and (d): the processor's Postgres writes without JetStream, half
	// of each before the processor and half after it (pgRefsAfter), so that
	// a host slowing down or speeding up in between moves both sides of the
	// processor's ratios alike.
	if err := pgRefs(ctx, p.log, p.st, p.body, c.Duration/2, 0, cpuMeter{pgPID: p.pgPID}, &p.batched, &p.single); err != nil {
		return err
	}
	refsAt := len(rep.Figures) // their figures go here, with the other references
	if err := p.drain(ctx, pg); err != nil {
		return err
	}
	if err := p.halfLoad(ctx); err != nil {
		return err
	}
	if err := p.pgRefsAfter(ctx, refsAt); err != nil {
		return err
	}
	if err := p.sqlHandlerStage(ctx, pg); err != nil {
		return err
	}
	p.ratios()
	return nil
}

// payloadRun is one payload size's measurement: its private NATS server
// and database, the roles under test, and what each stage measured for the
// ratios.
type payloadRun struct {
	c       Config
	rep     *Report
	log     *slog.Logger
	dir     string
	size    int
	signing provider.Config
	client  *http.Client
	body    []byte   // one event's body, for (b), (c) and (d)
	undo    []func() // what start and the stages started, stopped last first

	nc      *nats.Conn
	js      jetstream.JetStream
	st      *store.Store
	pgPID   int // the cluster's, for Postgres's CPU
	cfgPath string
	natsURL string
	url     string // ingress's webhook URL
	proc    *child

	bare, sat       loadResult // bare HTTP and ingress, saturated side by side
	barePub         loadResult // (f): bare HTTP answering after a PubAck, beside them
	satRSS          float64    // ingress's peak RSS after saturation
	syncRate        float64    // (b) raw JetStream publish, sync and async
	asyncRate       float64
	natsHalfRate    float64 // (e) the processor's JetStream work alone
	bareProcRate    float64 // (c+e) both halves in one loop
	bareProcCPU     cpuReading
	batched, single pgRate // (c) and (d), both halves
	procRate        float64
	// The machine's busy time per event (every process and the kernel):
	// (b sync) and (e); (a), ingress and (c) keep theirs in bare, sat and
	// batched, the processor's drain in procCPU with its parts.
	syncCPU, asyncCPU, natsHalfCPU time.Duration
	procCPU                        cpuReading
	sqlFwdRate                     float64 // the SQL handler stage (sqlhandler.go): Forward, then the handler
	sqlRate                        float64
	half, e2e                      loadResult // ingress at half load, and end to end
}

// newPayloadRun prepares a run; start sets up what it measures against.
func newPayloadRun(c Config, rep *Report, dir string, size int) *payloadRun {
	signing := provider.Config{Provider: "standard", Secrets: []string{benchSecret}}
	return &payloadRun{c: c, rep: rep, log: c.Log.With("payload", size), dir: dir, size: size,
		signing: signing, client: newClient(c.Connections),
		body: newRequests("", signing, size, "raw").body("raw")}
}

// stop stops everything the run started, last first.
func (p *payloadRun) stop() {
	for i := len(p.undo) - 1; i >= 0; i-- {
		p.undo[i]()
	}
}

// start sets up the run's NATS server (with Intake's streams), its
// database and the config file the roles read.
func (p *payloadRun) start(ctx context.Context, pg *pgcluster.Cluster) error {
	natsURL, err := p.startNATS()
	if err != nil {
		return err
	}
	p.natsURL = natsURL
	dbURL, err := p.openDB(ctx, pg)
	if err != nil {
		return err
	}
	p.pgPID = pg.PID()
	p.cfgPath = filepath.Join(p.dir, fmt.Sprintf("intake-%d.yaml", p.size))
	if err := os.WriteFile(p.cfgPath, []byte(fmt.Sprintf(`nats: {url: %q}
postgres: {url: %q}
debug: {pprof: true}
envelope: {keys: [%q]}
integrations:
  - {name: bench, provider: standard, tenant: bench, account: a, secrets: [%q], max_body_bytes: 1048576}
`, natsURL, dbURL, benchEnvelopeKey, benchSecret)), 0o600); err != nil {
		return err
	}
	// The roles only check the streams: create them as `intake migrate` does.
	return stream.Ensure(ctx, p.js, config.Stream{}.WithDefaults())
}

// startNATS starts an embedded nats-server with a store of its own and
// connects to it.
func (p *payloadRun) startNATS() (url string, err error) {
	natsAddr, err := freeAddr()
	if err != nil {
		return "", err
	}
	emb, err := natsserver.Run(natsserver.Config{Addr: natsAddr, StoreDir: filepath.Join(p.dir, fmt.Sprintf("nats-%d", p.size))})
	if err != nil {
		return "", err
	}
	p.undo = append(p.undo, emb.Shutdown)
	if p.nc, err = nats.Connect(emb.ClientURL()); err != nil {
		return "", err
	}
	p.undo = append(p.undo, p.nc.Close)
	if p.js, err = jetstream.New(p.nc); err != nil {
		return "", err
	}
	return emb.ClientURL(), nil
}

// openDB creates and migrates a database of the run's own and opens it.
func (p *payloadRun) openDB(ctx context.Context, pg *pgcluster.Cluster) (url string, err error) {
	db := fmt.Sprintf("bench_%d_%d", p.size, time.Now().UnixNano())
	if err := createDB(ctx, pg.URL("postgres"), db); err != nil {
		return "", err
	}
	dbURL := pg.URL(db)
	if err := store.Migrate(ctx, dbURL, nil); err != nil {
		return "", err
	}
	if p.st, err = store.Open(ctx, dbURL, 16); err != nil {
		return "", err
	}
	p.undo = append(p.undo, p.st.Close)
	return dbURL, nil
}

// startRole starts `intake role` as its own process, stopped with the run,
// and waits until it answers on ready; base is its HTTP address.
func (p *payloadRun) startRole(ctx context.Context, role, ready string) (ch *child, base string, err error) {
	return p.startRoleWith(ctx, role, p.cfgPath, fmt.Sprintf("%s-%d.log", role, p.size), ready)
}

// startRoleWith is startRole with a config file and log file of its own.
func (p *payloadRun) startRoleWith(ctx context.Context, role, cfgPath, logName, ready string) (ch *child, base string, err error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	ch, err = startChild(role, p.c.Binary, filepath.Join(p.dir, logName), nil,
		role, "--config", cfgPath, "--http-addr", addr, "--log-level", "error")
	if err != nil {
		return nil, "", err
	}
	p.undo = append(p.undo, ch.stop)
	base = "http://" + addr
	if err := ch.waitReady(ctx, base+ready); err != nil {
		return nil, "", err
	}
	return ch, base, nil
}

// add records a figure and logs it.
func (p *payloadRun) add(f Figure) {
	p.rep.Figures = append(p.rep.Figures, f)
	p.log.Info("measured", "stage", f.Stage, "per_second", int(f.Rate), "p99_ms", f.P99Ms)
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// saturate runs Intake ingress, as its own process, (a) bare HTTP and (f)
// bare HTTP answering after a PubAck: saturated in turn, side by side,
// with the same generator and requests.
func (p *payloadRun) saturate(ctx context.Context, bareAddr string) error {
	pubAddr, stopPub, err := p.startBarePublish(ctx)
	if err != nil {
		return err
	}
	defer stopPub()
	ing, base, err := p.startRole(ctx, "ingress", "/readyz")
	if err != nil {
		return err
	}
	p.url = base + "/webhooks/bench"
	nSlices := min(max(int(p.c.Duration/time.Second), 1), 5)
	// Three targets take turns for Duration each: ingress's slices fall
	// within the profile's window.
	ingProfile := p.c.profile(base, 3*p.c.Duration, fmt.Sprintf("ingress-%d.pprof", p.size))
	res, err := inTurn(ctx, p.client, []func(int) *requests{
		func(i int) *requests {
			return newRequests("http://"+bareAddr+"/", p.signing, p.size, fmt.Sprintf("bare%d", i))
		},
		func(i int) *requests { return newRequests(p.url, p.signing, p.size, fmt.Sprintf("sat%d", i)) },
		func(i int) *requests {
			return newRequests("http://"+pubAddr+"/", p.signing, p.size, fmt.Sprintf("pub%d", i))
		},
	}, p.c.Connections, p.c.Duration, nSlices)
	ingProfile()
	if err != nil {
		return err
	}
	p.bare, p.sat, p.barePub = res[0], res[1], res[2]
	if p.sat.Failed > 0 {
		p.log.Warn("ingress answered non-200", "failed", p.sat.Failed)
	}
	if p.barePub.Failed > 0 {
		return fmt.Errorf("reference (f) failed %d requests: %v", p.barePub.Failed, p.barePub.Why)
	}
	p.satRSS = ing.peakRSS() // now: later stages (more connections) raise the high-water mark
	p.add(Figure{Stage: "bare HTTP (reference a)", Payload: p.size, Rate: p.bare.rate(), P50Ms: millis(p.bare.pct(.5)), P99Ms: millis(p.bare.pct(.99)),
		Note: fmt.Sprintf("in %d slices, in turn with ingress and (f); %s (this process, the generator: %.3f)",
			nSlices, machineNote(p.bare.cpuPer().machine, "request"), millis(p.bare.cpuPer().self))})
	p.add(Figure{Stage: "bare HTTP + PubAck (reference f)", Payload: p.size, Rate: p.barePub.rate(), P50Ms: millis(p.barePub.pct(.5)), P99Ms: millis(p.barePub.pct(.99)),
		Note: fmt.Sprintf("(a) publishing the body to an INTAKE_IN-like stream and answering after the PubAck, nothing else; in turn with (a) and ingress; %s (this process, the generator and NATS: %.3f)",
			machineNote(p.barePub.cpuPer().machine, "request"), millis(p.barePub.cpuPer().self))})
	p.add(Figure{Stage: "intake ingress, saturation", Payload: p.size, Rate: p.sat.rate(), P50Ms: millis(p.sat.pct(.5)), P99Ms: millis(p.sat.pct(.99)), RSSMB: p.satRSS,
		Note: fmt.Sprintf("verify signature + PubAck before 200; %s (this process, the generator and NATS: %.3f)",
			machineNote(p.sat.cpuPer().machine, "event"), millis(p.sat.cpuPer().self))})
	return nil
}

// startBarePublish starts reference (f) on a stream of its own, configured
// like INTAKE_IN; stop ends it and deletes the stream.
func (p *payloadRun) startBarePublish(ctx context.Context) (addr string, stop func(), err error) {
	name, subj := fmt.Sprintf("BENCH_F_%d", p.size), fmt.Sprintf("bench.f.%d", p.size)
	if err := streamLike(ctx, p.js, stream.InConfig, name, subj); err != nil {
		return "", nil, err
	}
	dropStream := func() { _ = p.js.DeleteStream(context.WithoutCancel(ctx), name) }
	if addr, err = freeAddr(); err != nil {
		dropStream()
		return "", nil, err
	}
	ch, err := startChild("bare-publish", p.c.Binary, filepath.Join(p.dir, fmt.Sprintf("bare-publish-%d.log", p.size)), nil,
		"bench", "bare-publish", "--addr", addr, "--nats", p.natsURL, "--subject", subj)
	if err != nil {
		dropStream()
		return "", nil, err
	}
	stop = func() {
		ch.stop()
		dropStream()
	}
	if err := ch.waitReady(ctx, "http://"+addr+"/"); err != nil {
		stop()
		return "", nil, err
	}
	return addr, stop, nil
}

// rawPublish measures (b), raw JetStream publish, sync and async.
func (p *payloadRun) rawPublish(ctx context.Context) error {
	subj, err := rawStream(ctx, p.js, p.size)
	if err != nil {
		return err
	}
	if p.syncRate, p.syncCPU, err = busyPer(func() (float64, error) {
		return publishSync(ctx, p.js, subj, p.body, p.c.Connections, p.c.Duration)
	}); err != nil {
		return err
	}
	p.add(Figure{Stage: "raw JetStream publish, sync (reference b)", Payload: p.size, Rate: p.syncRate,
		Note: fmt.Sprintf("%d publishers, each awaiting its PubAck; %s", p.c.Connections, machineNote(p.syncCPU, "message"))})
	if p.asyncRate, p.asyncCPU, err = busyPer(func() (float64, error) {
		return publishAsync(ctx, p.nc, subj, p.body, p.c.Duration)
	}); err != nil {
		return err
	}
	p.add(Figure{Stage: "raw JetStream publish, async (reference b)", Payload: p.size, Rate: p.asyncRate,
		Note: "4096 PubAcks pending; " + machineNote(p.asyncCPU, "message")})
	// (e) drains what (b) stored, as the processor's JetStream half.
	pc := config.Processor{}.WithDefaults()
	if p.natsHalfRate, p.natsHalfCPU, err = busyPer(func() (float64, error) {
		return natsHalf(ctx, p.js, rawStreamName(p.size), p.size, pc.BatchSize, pc.Concurrency, p.c.Duration)
	}); err != nil {
		return err
	}
	p.add(Figure{Stage: "processor's JetStream work (reference e)", Payload: p.size, Rate: p.natsHalfRate,
		Note: fmt.Sprintf("(b)'s messages: fetch %d, publish each to an INTAKE_OUT-like stream, PubAcks, acks; %d in flight; %s",
			pc.BatchSize, pc.Concurrency, machineNote(p.natsHalfCPU, "message"))})
	// (c+e): both halves in one loop, as the processor runs them, once
	// (e)'s gigabytes at 16 KiB are gone (not written back meanwhile).
	if err := p.js.DeleteStream(ctx, natsHalfOutName(p.size)); err != nil {
		return err
	}
	if p.bareProcRate, p.bareProcCPU, err = bareProcessor(ctx, p.js, p.st, cpuMeter{pgPID: p.pgPID}, rawStreamName(p.size),
		envelope.PayloadSHA256(p.body), p.size, pc.BatchSize, pc.Concurrency, p.c.Duration); err != nil {
		_ = p.js.DeleteStream(context.WithoutCancel(ctx), bareProcessorOutName(p.size))
		return err
	}
	p.add(Figure{Stage: "the processor's parts in one loop (reference c+e)", Payload: p.size, Rate: p.bareProcRate,
		Note: fmt.Sprintf("(b)'s messages: fetch %d, (c)'s rows in one transaction, publish each to an INTAKE_OUT-like stream, PubAcks, acks, in series, nothing else; %d in flight; %s (this process, the client and NATS: %.3f, postgres %.3f)",
			pc.BatchSize, pc.Concurrency, machineNote(p.bareProcCPU.machine, "event"), millis(p.bareProcCPU.self), millis(p.bareProcCPU.pg))})
	if err := cleanTables(ctx, p.st); err != nil {
		return err
	}
	// Each stage cleans up after itself so the next does not pay for it: a
	// reference's gigabyte of stored messages (or dirty Postgres pages)
	// would otherwise be written back while Intake is measured.
	return errors.Join(p.js.DeleteStream(ctx, rawStreamName(p.size)), p.js.DeleteStream(ctx, bareProcessorOutName(p.size)))
}

// drain runs Intake processor, as its own process, on what ingress
// accepted, with Postgres's cost per event over the drain.
func (p *payloadRun) drain(ctx context.Context, pg *pgcluster.Cluster) error {
	pgw, err := openPGWindow(ctx, p.st, pg.PID())
	if err != nil {
		return err
	}
	var base string
	if p.proc, base, err = p.startRole(ctx, "processor", "/healthz"); err != nil {
		return err
	}
	procProfile := p.c.profile(base, p.c.Duration, fmt.Sprintf("processor-%d.pprof", p.size))
	if err := p.c.resetStatements(ctx, p.st); err != nil {
		return err
	}
	dr, err := drainRate(ctx, p.st, base, p.sat.OK, cpuMeter{child: p.proc, pgPID: p.pgPID})
	procProfile()
	if err != nil {
		return err
	}
	p.procRate, p.procCPU = dr.Rate, dr.CPUPer
	cost, err := pgw.close(ctx, "intake processor", p.size, p.sat.OK)
	if err != nil {
		return err
	}
	p.rep.Postgres = append(p.rep.Postgres, cost)
	if err := p.c.writeStatements(ctx, p.st, fmt.Sprintf("postgres-%d.txt", p.size)); err != nil {
		return err
	}
	p.add(Figure{Stage: "intake processor, committed", Payload: p.size, Rate: p.procRate, RSSMB: p.proc.peakRSS(),
		Note: fmt.Sprintf("forward handler; %.0f per tx, mean tx %s; %s (the processor %.3f, this process, NATS: %.3f, postgres %.3f)",
			dr.MeanBatch, dr.MeanTx.Round(100*time.Microsecond), machineNote(dr.CPUPer.machine, "event"),
			millis(dr.CPUPer.child), millis(dr.CPUPer.self), millis(dr.CPUPer.pg))})
	return nil
}

// halfLoad measures end to end at half the ingress maximum, with the
// moderate-rate ingress latency from the same run.
func (p *payloadRun) halfLoad(ctx context.Context) error {
	outTimes, stopOut, err := watchOut(ctx, p.js)
	if err != nil {
		return err
	}
	// Open loop: enough connections that the generator never runs out of
	// them while the server is slow (a provider fleet is not limited to
	// 64), so late requests show as the server's queueing, not ours.
	openConns := 4 * p.c.Connections
	p.half, err = generate(ctx, newClient(openConns), newRequests(p.url, p.signing, p.size, "e2e"), openConns, p.c.Duration, p.sat.rate()/2, true)
	if err != nil {
		stopOut()
		return err
	}
	p.e2e = endToEnd(ctx, p.half.Done, outTimes, 30*time.Second)
	stopOut()
	p.add(Figure{Stage: "intake ingress, half load", Payload: p.size, Rate: p.half.rate(), P50Ms: millis(p.half.pct(.5)), P99Ms: millis(p.half.pct(.99))})
	p.add(Figure{Stage: "end to end (2xx to INTAKE_OUT), half load", Payload: p.size, Rate: float64(len(p.e2e.Latencies)) / p.c.Duration.Seconds(),
		P50Ms: millis(p.e2e.pct(.5)), P99Ms: millis(p.e2e.pct(.99)), Note: fmt.Sprintf("%d of %d events seen", len(p.e2e.Latencies), len(p.half.Done))})
	return nil
}

// pgRefsAfter runs the second half of (c) and (d) as the first ran, with
// no processor: its relay would publish (c)'s rows during (d). Their
// figures go at refsAt, beside the other references.
func (p *payloadRun) pgRefsAfter(ctx context.Context, refsAt int) error {
	p.proc.stop()
	if err := cleanTables(ctx, p.st); err != nil {
		return err
	}
	if err := pgRefs(ctx, p.log, p.st, p.body, p.c.Duration/2, 1, cpuMeter{pgPID: p.pgPID}, &p.batched, &p.single); err != nil {
		return err
	}
	refs := []Figure{
		{Stage: "Postgres batched-insert limit (reference c)", Payload: p.size, Rate: p.batched.rate(),
			Note: fmt.Sprintf("256 per tx, 2 in flight; half before the processor, half after; %s (this process, the client: %.3f, postgres %.3f)",
				machineNote(p.batched.cpuPer().machine, "event"), millis(p.batched.cpuPer().self), millis(p.batched.cpuPer().pg))},
		{Stage: "one transaction per event (reference d)", Payload: p.size, Rate: p.single.rate(), Note: "8 in flight; half before the processor, half after"},
	}
	for _, f := range refs {
		p.log.Info("measured", "stage", f.Stage, "per_second", int(f.Rate))
	}
	p.rep.Figures = slices.Insert(p.rep.Figures, refsAt, refs...)
	return nil
}

// ratios compares Intake's figures with the limits measured beside them,
// against the targets BENCHMARKS.md explains.
func (p *payloadRun) ratios() {
	ingRatio := p.sat.rate() / p.bare.rate()
	p.ratio("ingress / bare HTTP", ingRatio, ">= 0.65", ingRatio >= 0.65)
	// Shown, not targets: (f) is (a) that answers after a PubAck and does
	// nothing else, so (f) / (a) is the most an ingress can reach here
	// with net/http and nats.go, and ingress / (f) is what Intake's own
	// work leaves of it.
	if p.barePub.rate() > 0 {
		p.ratio("bare HTTP + PubAck (f) / bare HTTP", p.barePub.rate()/p.bare.rate(), "", false)
		p.ratio("ingress / bare HTTP + PubAck (f)", p.sat.rate()/p.barePub.rate(), "", false)
	}
	p.ratio("ingress / raw JetStream async", p.sat.rate()/p.asyncRate, "", false)
	p.ratio("ingress / raw JetStream sync", p.sat.rate()/p.syncRate, "", false)
	// Shown, not targets: what the cores allow each role. Ingress is at
	// the least an HTTP request served (a) and a JetStream publish awaited
	// (b sync); the processor a batch's Postgres writes (c) and its
	// JetStream work (e). The machine's CPU per event of those parts,
	// added, bounds the role's rate at every core busy: the "most" ratio is
	// that bound over the reference's measured rate, and the role's own
	// CPU per event over its parts' says how much is Intake's own work.
	ingFloor := p.bare.cpuPer().machine + p.syncCPU
	if ingFloor > 0 {
		p.ratio("ingress / bare HTTP, the most the cores allow", mostRate(ingFloor)/p.bare.rate(), "", false)
		p.ratio("ingress CPU per event / (a) + (b sync)", float64(p.sat.cpuPer().machine)/float64(ingFloor), "", false)
	}
	pb := p.procRate / p.batched.rate()
	p.ratio("processor / batched-insert limit", pb, ">= 0.65", pb >= 0.65)
	// Shown, not targets: (c+e) does the processor's Postgres and JetStream
	// work and nothing else, in series (the processor overlaps a batch's
	// publishing with the next one's writes, so it may beat it); its CPU
	// per event is what the parts cost done together.
	if p.bareProcRate > 0 {
		p.ratio("processor's parts in one loop (c+e) / batched-insert limit", p.bareProcRate/p.batched.rate(), "", false)
		p.ratio("processor / its parts in one loop (c+e)", p.procRate/p.bareProcRate, "", false)
	}
	if procFloor := p.batched.cpuPer().machine + p.natsHalfCPU; procFloor > 0 && p.natsHalfRate > 0 {
		p.ratio("processor / batched-insert limit, the most the cores allow", mostRate(procFloor)/p.batched.rate(), "", false)
		p.ratio("processor CPU per event / (c) + (e)", float64(p.procCPU.machine)/float64(procFloor), "", false)
	}
	// A bound from a strict part of the processor's NATS work: every event
	// it processes it publishes to INTAKE_OUT, at no less CPU than the
	// cheaper of (b sync) and (b async) stores one (at 16 KiB 4,096
	// PubAcks pending cost more per message than 64 awaited), whatever
	// its fetches and acks cost besides.
	if strict := p.batched.cpuPer().machine + min(p.syncCPU, p.asyncCPU); strict > 0 {
		p.ratio("processor / batched-insert limit, at most: (c) + a publish", mostRate(strict)/p.batched.rate(), "", false)
	}
	// Shown, not a target: on a small host (c) itself is only 12-17x (d),
	// so a target here measured the machine, not Intake (BENCHMARKS.md).
	p.ratio("processor / one tx per event", p.procRate/p.single.rate(), "", false)
	sq := p.sqlRate / p.sqlFwdRate
	p.ratio("SQL handler processor / forward", sq, ">= 0.80", sq >= 0.80)
	ep := p.e2e.pct(.99).Seconds() / p.half.pct(.99).Seconds()
	p.ratio("e2e p99 / ingress p99 at half load", ep, "<= 5", ep <= 5)
	rss := p.satRSS
	p.ratio("ingress peak RSS MiB at saturation", rss, "< 150", rss < 150)
}

// mostRate is the events per second every core busy allows at perEvent of
// CPU each.
func mostRate(perEvent time.Duration) float64 {
	return float64(runtime.NumCPU()) * float64(time.Second) / float64(perEvent)
}

// machineNote says a stage's machine CPU per unit, for its figure's note.
func machineNote(per time.Duration, unit string) string {
	return fmt.Sprintf("machine CPU %.3f ms per %s", millis(per), unit)
}

// ratio records one ratio; met counts only with a target.
func (p *payloadRun) ratio(name string, v float64, target string, met bool) {
	r := Ratio{Name: name, Payload: p.size, Value: v, Target: target}
	if target != "" {
		r.Met = &met
	}
	p.rep.Ratios = append(p.rep.Ratios, r)
}

func createDB(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// drain is the processor's work on what ingress accepted, from its first
// commit to its last (process start-up excluded).
type drain struct {
	Rate      float64 // committed messages per second
	MeanBatch float64 // messages per transaction
	MeanTx    time.Duration
	CPUPer    cpuReading // CPU per message, first observation to last
}

// drainRate waits until the processor at base has committed want messages,
// watching its own counters, then checks the inbox holds them.
func drainRate(ctx context.Context, st *store.Store, base string, want int, meter cpuMeter) (drain, error) {
	// The drain runs from the last commit seen at the first observation to
	// the last commit, both from the processor's own clock
	// (last_commit_timestamp_seconds): scraping every few milliseconds to
	// time it was a tenth of the measured processor's CPU.
	var first procStats
	var cpu0 cpuReading
	poll := 20 * time.Millisecond // until the first commit, then slower
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		s, err := scrapeProcessor(ctx, base)
		if err != nil {
			return drain{}, err
		}
		if s.Messages > 0 && first.Messages == 0 {
			first, poll = s, 250*time.Millisecond
			cpu0 = meter.read()
		}
		if s.Messages >= float64(want) {
			if s.Messages == first.Messages || s.Last <= first.Last {
				return drain{}, errors.New("processor committed everything before the first observation; raise the load")
			}
			d := drain{Rate: (s.Messages - first.Messages) / (s.Last - first.Last),
				CPUPer: meter.read().sub(cpu0).per(s.Messages - first.Messages)}
			if s.Txs > 0 {
				d.MeanBatch = s.Messages / s.Txs
				d.MeanTx = time.Duration(s.TxSecs / s.Txs * float64(time.Second))
			}
			var n int
			if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM intake.inbox`).Scan(&n); err != nil {
				return drain{}, err
			}
			if n != want {
				return drain{}, fmt.Errorf("processor counted %d messages but the inbox holds %d rows, want %d", int(s.Messages), n, want)
			}
			return d, nil
		}
		select {
		case <-ctx.Done():
			return drain{}, ctx.Err()
		case <-time.After(poll):
		}
	}
	return drain{}, fmt.Errorf("processor did not commit %d events in 10 minutes", want)
}

type outTimes struct {
	mu sync.Mutex
	at map[string]outTime // event id → its first message on INTAKE_OUT
}

// outTime is when an event's processed message reached the watcher, and
// when NATS stored it on INTAKE_OUT (the stream's own timestamp): the
// difference is the watcher's delay, not the pipeline's.
type outTime struct {
	arrived, stored time.Time
}

// watchOut records when each event's processed message arrives.
func watchOut(ctx context.Context, js jetstream.JetStream) (*outTimes, func(), error) {
	cons, err := js.OrderedConsumer(ctx, envelope.StreamOut, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return nil, nil, err
	}
	ot := &outTimes{at: map[string]outTime{}}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		t := outTime{arrived: time.Now()}
		if md, err := m.Metadata(); err == nil {
			t.stored = md.Timestamp
		}
		id := m.Headers().Get(envelope.HeaderEventID)
		ot.mu.Lock()
		if _, ok := ot.at[id]; !ok {
			ot.at[id] = t
		}
		ot.mu.Unlock()
	})
	if err != nil {
		return nil, nil, err
	}
	return ot, cc.Stop, nil
}

// endToEnd waits (up to wait) for every accepted event's processed message
// and returns the 2xx-to-arrival latencies.
func endToEnd(ctx context.Context, done map[string]time.Time, ot *outTimes, wait time.Duration) loadResult {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ot.mu.Lock()
		n := 0
		for id := range done {
			if _, ok := ot.at[id]; ok {
				n++
			}
		}
		ot.mu.Unlock()
		if n == len(done) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var res loadResult
	ot.mu.Lock()
	defer ot.mu.Unlock()
	for id, t2xx := range done {
		if at, ok := ot.at[id]; ok {
			res.Latencies = append(res.Latencies, max(at.arrived.Sub(t2xx), 0))
		}
	}
	return res
}

// Print writes the report as a table, or JSON.
func (r *Report) Print(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "intake bench — %s — %s — took %s\n\n", r.Machine, r.Config, r.Duration)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "stage\tpayload\tper second\tp50 ms\tp99 ms\tpeak RSS MiB\tnote")
	for _, f := range r.Figures {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\n", f.Stage, f.Payload, f.Rate, opt(f.P50Ms), opt(f.P99Ms), opt(f.RSSMB), f.Note)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ratio\tpayload\tvalue\ttarget\tmet")
	for _, q := range r.Ratios {
		met := ""
		if q.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*q.Met]
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%s\t%s\n", q.Name, q.Payload, q.Value, q.Target, met)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printDeliveries(w, r.Deliveries); err != nil {
		return err
	}
	return printPGCosts(w, r.Postgres)
}

func opt(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

// profile starts a CPU profile of the process serving base for about d and
// returns a function that waits for it and writes it to ProfileDir/name.
// Without ProfileDir it does nothing.
func (c Config) profile(base string, d time.Duration, name string) (wait func()) {
	if c.ProfileDir == "" {
		return func() {}
	}
	secs := max(int(d.Seconds())-1, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, secs))
		if err != nil {
			c.Log.Warn("profile failed", "name", name, "err", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(c.ProfileDir, name))
		if err != nil {
			c.Log.Warn("profile failed", "name", name, "err", err)
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
	}()
	return func() { <-done }
}

// resetStatements starts pg_stat_statements' count afresh (with
// ProfileDir only).
func (c Config) resetStatements(ctx context.Context, st *store.Store) error {
	if c.ProfileDir == "" {
		return nil
	}
	_, err := st.Pool().Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset()`)
	return err
}

// writeStatements writes ProfileDir/name: the statements that took the
// most Postgres time since resetStatements.
func (c Config) writeStatements(ctx context.Context, st *store.Store, name string) error {
	if c.ProfileDir == "" {
		return nil
	}
	rows, err := st.Pool().Query(ctx, `SELECT calls, total_exec_time, total_exec_time / calls, rows,
			left(regexp_replace(query, '\s+', ' ', 'g'), 120)
		FROM pg_stat_statements WHERE calls > 0 ORDER BY total_exec_time DESC LIMIT 20`)
	if err != nil {
		return fmt.Errorf("pg_stat_statements: %w", err)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "calls\ttotal ms\tmean ms\trows\t statement")
	var calls, n int64
	var total, mean float64
	var q string
	_, err = pgx.ForEachRow(rows, []any{&calls, &total, &mean, &n, &q}, func() error {
		fmt.Fprintf(tw, "%d\t%.1f\t%.3f\t%d\t %s\n", calls, total, mean, n, q)
		return nil
	})
	if err != nil {
		return fmt.Errorf("pg_stat_statements: %w", err)
	}
	tw.Flush()
	return os.WriteFile(filepath.Join(c.ProfileDir, name), []byte(b.String()), 0o644)
}
