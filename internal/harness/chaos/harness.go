package chaos

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/pgcluster"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/stream"
)

// The one integration every delivery goes to.
const (
	integration = "chaos"
	tenant      = "chaos"
	account     = "main"
)

// harness is one run: the processes, the database, the client connection.
type harness struct {
	o     Options
	part  *partition // Partition: the proxies and findings; nil otherwise
	dir   string
	runID string
	start time.Time

	// pg is the primary (the one server without Failover). With Failover,
	// standby streams from it (nil from the failover until the old primary
	// rejoins), fallen is the killed primary until it rejoins, and pgAll
	// are both servers in the multi-host URL's order.
	pg      *pgServer
	standby *pgServer
	fallen  *pgServer
	pgAll   []*pgcluster.Cluster
	dbURL   string
	db      *pgxpool.Pool
	// apiToken is the replayer's operator token (Failover); redrive: the
	// re-drive keys are in its config.
	apiToken string
	redrive  bool

	nats     []*natsNode
	ingress  []*child
	procs    []*child
	replayer *child   // Failover: the re-drive
	children []*child // all of the above, for supervision and shutdown

	ports   portPool
	cfgPath string
	// natsConfPath is the nodes' server configuration (the shipped one plus
	// the harness's user); natsPasswords are the run's, by user.
	natsConfPath  string
	natsPasswords map[string]string
	secret        string
	nc            *nats.Conn
	js            jetstream.JetStream

	superviseStop func()
	crashMu       sync.Mutex
	crashes       []string // roles that exited by themselves while running
	notes         []string // roles that exited during a start (a dependency was down)
}

type natsNode struct {
	*child
	name        string
	port        int
	clusterPort int
}

// Run starts the system under test as separate processes, drives the load
// and the faults, waits for the pipeline to drain and returns the verdict.
// The error is for a run that could not be carried out (a process did not
// start, the run timed out); violations of the guarantees are in the
// Result (see Result.OK).
func Run(ctx context.Context, o Options) (*Result, error) {
	o = o.WithDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	h := &harness{o: o, runID: randomHex(3), start: time.Now()}
	res, err := h.run(ctx)
	h.shutdown()
	// The expected outcome is a PASS, or a FAIL for the negative control.
	expected := err == nil && res.OK() != o.Control
	switch {
	case h.dir == "":
	case expected && !o.Keep && o.Dir == "":
		_ = os.RemoveAll(h.dir)
	default:
		h.logf("run directory kept: %s", h.dir)
	}
	return res, err
}

func (h *harness) logf(format string, args ...any) {
	el := time.Since(h.start).Truncate(100 * time.Millisecond)
	fmt.Fprintf(h.o.Log, "[%7s] %s\n", el, fmt.Sprintf(format, args...))
}

func (h *harness) run(ctx context.Context) (*Result, error) {
	if err := h.prepareDir(); err != nil {
		return nil, err
	}
	topo := "1 NATS node"
	if h.o.Cluster {
		topo = "3-node NATS cluster (R3 streams)"
	}
	if h.o.Failover {
		topo += ", Postgres primary and " + h.replication() + " standby"
	}
	h.logf("chaos: %d events, %d ingress, %d processors, %s, seed %d, dir %s",
		h.o.Events, h.o.Ingress, h.o.Processors, topo, h.o.Seed, h.dir)
	if h.o.Handler == HandlerSQL {
		h.logf("business rows: a SQL handler in the config (handlers: chaos-effects), run by the stock processor")
	}
	switch {
	case h.o.Control && h.o.Partition:
		h.logf("NEGATIVE CONTROL: the processors' Postgres URL turns Intake's bounds off (connect_timeout=0, no idle_in_transaction_session_timeout); this run must FAIL")
	case h.o.Control:
		h.logf("NEGATIVE CONTROL: the processors write the business row outside the inbox transaction; this run must FAIL")
	}
	if err := h.writeNATSConfig(); err != nil {
		return nil, err
	}
	if err := h.startNATS(ctx); err != nil {
		return nil, err
	}
	if err := h.startPostgres(ctx); err != nil {
		return nil, err
	}
	if err := h.writeConfig(); err != nil {
		return nil, err
	}
	if err := h.migrate(ctx); err != nil {
		return nil, err
	}
	if err := h.startRoles(ctx); err != nil {
		return nil, err
	}
	h.supervise(ctx)

	events := plan(h.o, h.runID)
	ingress := make([]string, len(h.ingress))
	for i, c := range h.ingress {
		ingress[i] = c.addr()
	}
	signer := provider.Config{Provider: "standard", Secrets: []string{h.secret}}
	ld := newLoad(h.o, events, ingress, integration, signer)
	f := newFaults(h, ld)

	h.logf("load: %d events at %.0f/s, faults: %s", len(events), h.o.Rate, f.describe())
	loadStart := time.Now()
	var wg sync.WaitGroup
	var loadErr, faultErr error
	var loadDur time.Duration
	stopProgress := h.progress(ld)
	wg.Go(func() {
		loadErr = ld.run(ctx)
		loadDur = time.Since(loadStart)
		stopProgress()
		if loadErr == nil {
			h.logf("load done in %s: every delivery answered 2xx; %d HTTP attempts, %d responses dropped, %d late deliveries",
				loadDur.Round(100*time.Millisecond), ld.httpAttempts.Load(), ld.lostResponses.Load(), ld.lateSent.Load())
		}
	})
	wg.Go(func() { faultErr = f.run(ctx) })
	wg.Wait()
	if err := errors.Join(loadErr, faultErr); err != nil {
		return nil, fmt.Errorf("chaos: load and faults: %w", err)
	}

	// Everything runs again before the pipeline is judged.
	for _, c := range h.children {
		if err := h.restart(ctx, c); err != nil {
			return nil, err
		}
	}
	settleStart := time.Now()
	if err := h.settle(ctx, ld); err != nil {
		h.logf("settle: %v (judging what is there)", err)
	}
	h.logf("settled in %s", time.Since(settleStart).Round(100*time.Millisecond))

	ev, err := h.collect(ctx)
	if err != nil {
		return nil, err
	}
	res := judge(h.o, events, ev)
	res.Cluster, res.Control, res.SQLHandler = h.o.Cluster, h.o.Control, h.o.Handler == HandlerSQL
	res.Failover, res.Async, res.RedriveConfigured = h.o.Failover, h.o.Async, h.redrive
	if h.o.Failover {
		res.RedrivenAudit, res.RedrivenMetric = h.redriveCount(ctx)
		res.WALAfterCut, res.DBFailures = f.walAfterCut, -1
		res.NoCut, res.RedeliveredAtKill, res.RedeliveredProcs, res.RedeliveredClean = h.o.NoCut, f.redeliveredAtKill, f.redeliveredProcs, f.redeliveredClean
		if !f.promotedAt.IsZero() {
			res.DBFailures = h.dbFailuresLogged(f.cutAt, f.promotedAt.Add(failoverTail))
		}
	}
	res.HTTPDeliveries = int(ld.httpAttempts.Load())
	res.LostResponses = int(ld.lostResponses.Load())
	res.Answers = ld.answerCounts()
	res.Faults = f.log
	res.ProcessorKills = f.kills
	res.NATSFaults, res.PostgresFaults, res.PostgresRejoins = f.natsFaults, f.pgFaults, f.pgRejoins
	h.crashMu.Lock()
	res.Notes = append([]string(nil), h.notes...)
	for _, c := range h.crashes {
		res.violate("a role exited by itself (an outage must pause a role, not end it): %s", c)
	}
	h.crashMu.Unlock()
	res.LoadDuration = loadDur
	res.Duration = time.Since(h.start)
	res.checkFaults(h.o)
	res.checkFailover(h.o)
	h.judgePartition(res, ld)
	return res, nil
}

func (h *harness) prepareDir() error {
	dir := h.o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "intake-chaos-")
		if err != nil {
			return fmt.Errorf("chaos: run dir: %w", err)
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("chaos: run dir: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	// As root, postgres runs as the postgres OS user and must enter it.
	if err := os.Chmod(abs, 0o755); err != nil {
		return fmt.Errorf("chaos: run dir: %w", err)
	}
	h.dir = abs
	return nil
}

func (h *harness) path(name string) string { return filepath.Join(h.dir, name) }

// startNATS starts one node, or three joined in a cluster, each an `intake
// nats` process, and connects the harness's own client.
func (h *harness) startNATS(ctx context.Context) error {
	n := 1
	if h.o.Cluster {
		n = 3
	}
	for i := range n {
		node := &natsNode{name: fmt.Sprintf("chaos-n%d", i+1)}
		var err error
		if node.port, err = h.ports.take(); err != nil {
			return err
		}
		if h.o.Cluster {
			if node.clusterPort, err = h.ports.take(); err != nil {
				return err
			}
		}
		h.nats = append(h.nats, node)
	}
	for i, node := range h.nats {
		store := h.path(fmt.Sprintf("nats-%d", i+1))
		args := []string{"nats", "--config", h.natsConfPath, "--addr", loopback(node.port), "--store-dir", store, "--name", node.name}
		if h.o.Cluster {
			var routes []string
			for j, other := range h.nats {
				if j != i {
					routes = append(routes, "nats-route://"+loopback(other.clusterPort))
				}
			}
			args = append(args, "--cluster-name", "chaos", "--cluster-addr", loopback(node.clusterPort),
				"--routes", strings.Join(routes, ","))
		}
		node.child = &child{
			name: "nats-" + strconv.Itoa(i+1), bin: h.o.Binary, args: func() []string { return args },
			logPath: h.path(fmt.Sprintf("nats-%d.log", i+1)), env: h.natsServerEnv(),
			ready: natsReady(loopback(node.port), node.name, harnessUser, h.natsPasswords[harnessUser]),
		}
		h.children = append(h.children, node.child)
	}
	// Cluster nodes wait for each other: start them all, then wait.
	var wg sync.WaitGroup
	errs := make([]error, len(h.nats))
	for i, node := range h.nats {
		wg.Go(func() { errs[i] = node.Start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The run is on credentials: a client without them is turned away.
	if anon, err := nats.Connect(h.natsURL(), nats.NoReconnect(), nats.Timeout(2*time.Second)); err == nil {
		anon.Close()
		return fmt.Errorf("chaos: NATS accepted a client without credentials: %s not applied", h.natsConfPath)
	}
	nc, err := stream.Connect(h.harnessNATS(), harnessUser, false, nil)
	if err != nil {
		return err
	}
	h.nc = nc
	if h.js, err = jetstream.New(nc); err != nil {
		return err
	}
	if err := h.jetStreamReady(ctx, time.Minute); err != nil {
		return err
	}
	h.logf("nats: %s", h.natsURL())
	return nil
}

// jetStreamReady waits until JetStream answers the harness's client.
func (h *harness) jetStreamReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := poll(ctx, 200*time.Millisecond, func() error {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := h.js.AccountInfo(actx)
		return err
	})
	if err != nil {
		return fmt.Errorf("chaos: jetstream not ready: %w", err)
	}
	return nil
}

func (h *harness) natsURL() string {
	urls := make([]string, len(h.nats))
	for i, n := range h.nats {
		urls[i] = "nats://" + loopback(n.port)
	}
	return strings.Join(urls, ",")
}

// startPostgres starts one server, or with Failover a primary and a
// standby (startPair), and creates the database.
func (h *harness) startPostgres(ctx context.Context) error {
	if h.o.Failover {
		if err := h.startPair(ctx); err != nil {
			return err
		}
	} else {
		// Fast: fsync off. A stop/start loses nothing either way; the run
		// only spares the shared disk.
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: h.path("postgres"), Fast: true})
		if err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
		h.pg = &pgServer{Cluster: c}
	}
	conn, err := pgx.Connect(ctx, h.postgresURL("postgres"))
	if err != nil {
		return fmt.Errorf("chaos: postgres: %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE intake")
	conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("chaos: create database: %w", err)
	}
	h.dbURL = h.postgresURL("intake")
	h.logf("postgres: %s", h.dbURL)
	return nil
}

func (h *harness) writeConfig() error {
	key := make([]byte, 24)
	_, _ = rand.Read(key)
	h.secret = "whsec_" + base64.StdEncoding.EncodeToString(key)
	replicas := 1
	if h.o.Cluster {
		replicas = 3
	}
	api := ""
	if h.o.Failover {
		h.apiToken = randomHex(16)
		h.redrive = redriveKeysKnown()
		api = h.apiYAML()
	}
	handlers := ""
	if h.o.Handler == HandlerSQL {
		handlers = EffectsSQL
	}
	cfg := fmt.Sprintf(`# Written by the chaos harness (internal/harness/chaos) for one run.
nats:
  url: %q
  # each process's own user (deploy/nats/intake.conf), from its environment
  user: "${INTAKE_NATS_USER}"
  password: "${INTAKE_NATS_PASSWORD}"
  stream: {replicas: %d, max_age: 24h, duplicate_window: %s}
  publish_timeout: 5s
postgres:
  url: %q
  max_conns: 10
processor:
  ack_wait: %s
outbox:
  poll_interval: 250ms
# as deployed: ingress signs every envelope, the processor verifies it
envelope: {keys: [%q]}
integrations:
  - name: %s
    provider: standard
    tenant: %s
    account: %s
    secrets: [%q]
    # Ordered events carry {"object": {"id", "version"}}; the others have
    # no object and no ordering.
    object_id: {field: object.id}
    object_version: {field: object.version}
%s%s`, h.natsURL(), replicas, h.o.DuplicateWindow, h.dbURL, h.o.AckWait, randomHex(32), integration, tenant, account, h.secret, api, handlers)
	h.cfgPath = h.path("intake.yaml")
	return os.WriteFile(h.cfgPath, []byte(cfg), 0o600)
}

// migrate runs `intake migrate` — the SQL migrations, then the streams, as
// the NATS admin — and creates the business table.
func (h *harness) migrate(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, h.o.Binary, "migrate", "--config", h.cfgPath)
	cmd.Env = append(os.Environ(), h.roleEnv("admin")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: intake migrate: %w\n%s", err, out)
	}
	db, err := pgxpool.New(ctx, h.dbURL)
	if err != nil {
		return fmt.Errorf("chaos: postgres: %w", err)
	}
	h.db = db
	if _, err := db.Exec(ctx, EffectsDDL); err != nil {
		return fmt.Errorf("chaos: create chaos.effects: %w", err)
	}
	return nil
}

// startRoles starts the ingress and processor processes.
func (h *harness) startRoles(ctx context.Context) error {
	if h.o.Partition {
		if err := h.startPartitionProxies(); err != nil {
			return err
		}
	}
	mk := func(role string, i int, cmd []string, extra ...string) (*child, error) {
		port, err := h.ports.take()
		if err != nil {
			return nil, err
		}
		c := &child{name: fmt.Sprintf("%s-%d", role, i+1), bin: h.o.Binary, logPath: h.path(fmt.Sprintf("%s-%d.log", role, i+1)),
			env: h.roleEnv(role)}
		c.port = port
		c.args = func() []string {
			args := append(append([]string{}, cmd...), "--config", h.roleConfig(role), "--http-addr", c.addr(), "--log-format", "json")
			return append(args, extra...)
		}
		c.ready = func(ctx context.Context) error { return httpReady(c.addr())(ctx) }
		h.children = append(h.children, c)
		return c, nil
	}
	for i := range h.o.Ingress {
		c, err := mk("ingress", i, []string{"ingress"})
		if err != nil {
			return err
		}
		h.ingress = append(h.ingress, c)
	}
	for i := range h.o.Processors {
		handler := "effects"
		switch {
		case h.o.Control && !h.o.Partition: // a partition's control is in its URL
			handler = "effects-outside-tx"
		case h.o.Handler == HandlerSQL:
			handler = "none" // the config's handlers: (EffectsSQL) write the row
		}
		// The production processor with the harness's domain handler and
		// crash switch: a hidden bench subcommand, so `intake processor`
		// itself carries no fault injection.
		c, err := mk("processor", i, []string{"bench", ProcessorCommand}, "--handler", handler)
		if err != nil {
			return err
		}
		h.procs = append(h.procs, c)
	}
	if h.o.Failover {
		c, err := mk("replayer", 0, []string{"replayer"})
		if err != nil {
			return err
		}
		h.replayer = c
	}
	for _, c := range h.roles() {
		if err := h.startOnFreePort(ctx, c); err != nil {
			return err
		}
	}
	h.logf("ingress: %d processes, processors: %d processes", len(h.ingress), len(h.procs))
	if h.replayer != nil {
		if h.redrive {
			h.logf("replayer: 1 process, re-drive every %s over the last %s", yamlDuration(redriveInterval), yamlDuration(redriveLookback))
		} else {
			h.logf("replayer: 1 process; this build's config has no re-drive keys (api.redrive_interval): commits lost with the primary stay lost")
		}
	}
	return nil
}

// roles are the Intake processes: ingress, processors and the replayer.
func (h *harness) roles() []*child {
	r := append(append([]*child{}, h.ingress...), h.procs...)
	if h.replayer != nil {
		r = append(r, h.replayer)
	}
	return r
}

// startOnFreePort starts c; when it dies at once (its port was taken in
// the meantime) it tries twice more on new ports.
func (h *harness) startOnFreePort(ctx context.Context, c *child) error {
	var err error
	for range 3 {
		if err = c.Start(ctx); err == nil || c.Running() || ctx.Err() != nil {
			return err
		}
		p, perr := h.ports.take()
		if perr != nil {
			return perr
		}
		c.mu.Lock()
		c.port = p
		c.mu.Unlock()
	}
	return err
}

// restart starts c again like an orchestrator would: a role that exits
// during its start (it needs NATS and Postgres to come up, and one of them
// may be down for a fault) is started again after a second, for up to two
// minutes.
func (h *harness) restart(ctx context.Context, c *child) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		err := c.Start(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if errors.Is(err, errExitedEarly) {
			h.note(fmt.Sprintf("%s %v; started again", c.name, err))
		} else {
			h.logf("%s: %v; starting it again in 1s", c.name, err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// supervise restarts processes that exit without being killed, as an
// orchestrator would, and records each such exit as a violation: a running
// role must ride out NATS and Postgres outages.
func (h *harness) supervise(ctx context.Context) {
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			for _, c := range h.children {
				if crashed, err := c.unexpectedExit(); crashed {
					msg := fmt.Sprintf("%s exited by itself at %s (%v): %s", c.name,
						time.Since(h.start).Round(100*time.Millisecond), err, lastLine(c.logPath))
					h.logf("%s; restarting it", msg)
					h.crashMu.Lock()
					h.crashes = append(h.crashes, msg)
					h.crashMu.Unlock()
					if err := h.restart(sctx, c); err != nil && sctx.Err() == nil {
						h.logf("restart %s: %v", c.name, err)
					}
				}
			}
		}
	}()
	h.superviseStop = func() { cancel(); <-done }
}

// note records what the verdict does not judge but a reader should know:
// a role that failed its start while NATS or Postgres was down (roles fail
// fast at start and are started again, as an orchestrator would).
func (h *harness) note(msg string) {
	msg = fmt.Sprintf("at %s: %s", time.Since(h.start).Round(100*time.Millisecond), msg)
	h.logf("%s", msg)
	h.crashMu.Lock()
	h.notes = append(h.notes, msg)
	h.crashMu.Unlock()
}

// progress prints a line every 5 seconds while the load runs.
func (h *harness) progress(ld *load) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				acked := 0
				for _, e := range ld.events {
					if e.first2xx.Load() != 0 {
						acked++
					}
				}
				h.logf("load: %d/%d events started, %d acknowledged, %d HTTP attempts, %d responses dropped",
					ld.dispatched.Load(), len(ld.events), acked, ld.httpAttempts.Load(), ld.lostResponses.Load())
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// settle waits until the processor consumer has nothing pending or
// unacknowledged and the outbox is empty, twice in a row a second apart.
// With the re-drive it also waits, up to redriveGrace, for acknowledged
// events the inbox lacks (commits lost with a failed-over primary).
func (h *harness) settle(ctx context.Context, ld *load) error {
	ctx, cancel := context.WithTimeout(ctx, h.o.SettleTimeout)
	defer cancel()
	calm := 0
	var last string
	var idleSince time.Time
	passesAtComplete := -1
	err := poll(ctx, time.Second, func() error {
		state, idle := h.pipelineState(ctx)
		if idle && h.redrive {
			if idleSince.IsZero() {
				idleSince = time.Now()
			}
			passes, perr := metricSum(ctx, h.replayer.addr(), redrivePassesMetric)
			n := h.missingFromInbox(ctx, ld)
			if n != 0 {
				passesAtComplete = -1
			} else if passesAtComplete < 0 && perr == nil {
				passesAtComplete = passes
			}
			switch {
			case time.Since(idleSince) >= redriveGrace:
				if n != 0 {
					state += fmt.Sprintf("; %d acknowledged events still not in the inbox after %s for the re-drive", n, redriveGrace)
				}
			case n != 0:
				state += fmt.Sprintf("; %d acknowledged events not in the inbox: waiting up to %s for the re-drive", n, redriveGrace)
				idle = false
			case perr != nil || passesAtComplete < 0 || passes < passesAtComplete+2:
				// A pass counts when it ends: the second to end after
				// the inbox held every acknowledged event began after
				// that, and saw everything. A lost conflict record leaves
				// no trace in the inbox count, and one whose key was
				// re-driven is judged only once the re-driven copy has
				// its row: a pass that began before then cannot see it.
				state += "; waiting for a re-drive pass that began once the inbox was complete"
				idle = false
			}
		}
		if state != last {
			h.logf("settle: %s", state)
			last = state
		}
		if !idle {
			calm = 0
			return errors.New(state)
		}
		if calm++; calm < 2 {
			return errors.New("idle once")
		}
		return nil
	})
	return err
}

func (h *harness) pipelineState(ctx context.Context) (string, bool) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cons, err := h.js.Consumer(cctx, envelope.StreamIn, envelope.ConsumerName)
	if err != nil {
		return "consumer: " + err.Error(), false
	}
	ci, err := cons.Info(cctx)
	if err != nil {
		return "consumer: " + err.Error(), false
	}
	var inbox, pending int
	err = h.db.QueryRow(cctx, `SELECT (SELECT count(*) FROM intake.inbox),
		(SELECT count(*) FROM intake.outbox_pending)`).Scan(&inbox, &pending)
	if err != nil {
		return "postgres: " + err.Error(), false
	}
	state := fmt.Sprintf("consumer pending %d, unacked %d; inbox %d rows; outbox unpublished %d",
		ci.NumPending, ci.NumAckPending, inbox, pending)
	return state, ci.NumPending == 0 && ci.NumAckPending == 0 && pending == 0
}

// missingFromInbox is how many acknowledged events have no inbox row
// (-1 when the database does not answer).
func (h *harness) missingFromInbox(ctx context.Context, ld *load) int {
	acked := 0
	for _, e := range ld.events {
		if e.first2xx.Load() != 0 {
			acked++
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var rows int
	err := h.db.QueryRow(cctx, `SELECT count(*) FROM intake.inbox WHERE integration = $1 AND account = $2`,
		integration, account).Scan(&rows)
	if err != nil {
		return -1
	}
	return max(0, acked-rows)
}

// shutdown stops everything: roles first (they drain), then NATS, then
// Postgres.
func (h *harness) shutdown() {
	if h.superviseStop != nil {
		h.superviseStop()
	}
	var wg sync.WaitGroup
	for _, c := range h.roles() {
		wg.Go(func() { c.Stop(30 * time.Second) })
	}
	wg.Wait()
	if h.part != nil {
		h.part.close()
	}
	if h.nc != nil {
		h.nc.Close()
	}
	for _, n := range h.nats {
		wg.Go(func() { n.Stop(30 * time.Second) })
	}
	wg.Wait()
	if h.db != nil {
		h.db.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range []*pgServer{h.pg, h.standby, h.fallen} {
		if s == nil {
			continue
		}
		if err := s.Stop(ctx); err != nil {
			h.logf("stop postgres %s: %v", s.name, err)
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
