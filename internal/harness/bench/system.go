package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/provider"
)

// The system stage (`intake bench --system`, issue 35): the whole pipeline
// as `intake dev` deploys it on one machine — embedded NATS, its private
// Postgres, ingress, processor, relay and API in one process tree — under
// a closed-loop generator (Config.Connections connections posting signed
// Standard Webhooks deliveries with fresh ids for Config.Duration), and
// the CPU the system under test spent per accepted event: the dev process
// and every Postgres process (the postmaster, its backends, and those it
// reaped) from /proc, from before the load to the end of the drain (every
// accepted event in the inbox and relayed from the outbox). The generator
// runs in this process and is not counted. The bare HTTP server, loaded
// the same way in the same run, is the reference: its CPU per request and
// its rate, against which the deployed pipeline's rate is a ratio. Then,
// on the same servers once idle, the floor (floor.go): what the
// pipeline's parts cost per event with none of Intake's code between
// them.

// systemDrainWait bounds the wait for the drain after the load.
const systemDrainWait = 5 * time.Minute

// runSystem measures one payload size.
func runSystem(ctx context.Context, c Config, rep *Report, dir, bareAddr string, bare *child, size int) error {
	log := c.Log.With("payload", size, "stage", "system")
	signing := provider.Config{Provider: "standard", Secrets: []string{benchSecret}}
	client := newClient(c.Connections)

	// The reference first: bare HTTP, its CPU per request.
	bareCPU := bare.cpu()
	bareRes, err := generate(ctx, client, newRequests("http://"+bareAddr+"/", signing, size, "sysbare"), c.Connections, c.Duration, 0, false)
	if err != nil {
		return err
	}
	bareCPU = bare.cpu() - bareCPU
	if bareRes.OK == 0 {
		return fmt.Errorf("system: bare HTTP answered no request: %v", bareRes.Why)
	}

	sys, err := startSystem(ctx, c, dir, size)
	if err != nil {
		return err
	}
	defer sys.stop()
	cpu0, err := sys.cpu()
	if err != nil {
		return err
	}
	pg0, err := postgresCPU(sys.pg)
	if err != nil {
		return err
	}
	profile := c.profile(sys.base, c.Duration, fmt.Sprintf("system-%d.pprof", size))
	res, err := generate(ctx, client, newRequests(sys.base+"/webhooks/bench", signing, size, "sys"), c.Connections, c.Duration, 0, false)
	if err != nil {
		return err
	}
	if res.OK == 0 {
		return fmt.Errorf("system: intake dev accepted no delivery: %v", res.Why)
	}
	drainStart := time.Now()
	if err := sys.drained(ctx, res.OK); err != nil {
		return err
	}
	drainTime := time.Since(drainStart)
	cpu1, err := sys.cpu()
	if err != nil {
		return err
	}
	pg1, err := postgresCPU(sys.pg)
	if err != nil {
		return err
	}
	profile()
	pgPer := (pg1 - pg0) / time.Duration(res.OK)
	total := res.Elapsed + drainTime
	perEvent := (cpu1 - cpu0) / time.Duration(res.OK)
	barePer := bareCPU / time.Duration(bareRes.OK)
	// Accepted and processed over the load and its drain: what the
	// deployed pipeline keeps up with.
	kept := float64(res.OK) / total.Seconds()
	log.Info("measured", "accepted", res.OK, "cpu_per_event_ms", millis(perEvent), "kept_up_per_second", int(kept))
	rep.Figures = append(rep.Figures,
		Figure{Stage: "(a') bare HTTP, CPU per request", Payload: size, Rate: bareRes.rate(), P50Ms: millis(bareRes.pct(.5)), P99Ms: millis(bareRes.pct(.99)),
			Note: fmt.Sprintf("%.3f ms CPU per request (the server process)", millis(barePer))},
		Figure{Stage: "system as deployed (intake dev), accepted", Payload: size, Rate: res.rate(), P50Ms: millis(res.pct(.5)), P99Ms: millis(res.pct(.99)),
			RSSMB: sys.dev.peakRSS(), Note: fmt.Sprintf("%d accepted, %d refused %v", res.OK, res.Failed, res.Why)},
		Figure{Stage: "system as deployed, kept up (load + drain)", Payload: size, Rate: kept,
			Note: fmt.Sprintf("%.3f ms CPU per event: dev process %.3f + every postgres process %.3f; drained in %s",
				millis(perEvent), millis(perEvent-pgPer), millis(pgPer), drainTime.Round(time.Millisecond))})
	target, limit := 0.20, "<= 0.20"
	if size > 4096 {
		target, limit = 0.50, "<= 0.50"
	}
	ms := millis(perEvent)
	rr := func(name string, v float64, tgt string, met bool) {
		r := Ratio{Name: name, Payload: size, Value: v, Target: tgt}
		if tgt != "" {
			r.Met = &met
		}
		rep.Ratios = append(rep.Ratios, r)
	}
	rr("system CPU ms per event as deployed", ms, limit, ms <= target)
	keptRatio := kept / bareRes.rate()
	rr("system kept-up rate / bare HTTP", keptRatio, ">= 0.35", keptRatio >= 0.35)
	rr("system CPU per event / bare HTTP CPU per request", float64(perEvent)/float64(max(barePer, 1)), "", false)

	// The floor, on the system's own servers, now idle.
	fl, err := measureFloor(ctx, c, sys, size, min(c.Duration, systemFloorTime))
	if err != nil {
		return err
	}
	floor := fl.sum(barePer)
	log.Info("floor", "cpu_per_event_ms", millis(floor))
	rep.Figures = append(rep.Figures,
		Figure{Stage: "floor: the pipeline's parts, no Intake work", Payload: size,
			Note: fmt.Sprintf("%.3f ms CPU per event: (a') HTTP %.3f + (b') JetStream publish awaited %.3f + (e') fetch, publish out, PubAck, ack %.3f + (c') the processor's rows, batched %.3f (Postgres %.3f; the inbox claim alone %.3f); idle dev process %.1f ms/s subtracted",
				millis(floor), millis(barePer), millis(fl.publish), millis(fl.natsHalf), millis(fl.pgWrites), millis(fl.pgServer), millis(fl.claims), millis(fl.idle))})
	rr("floor CPU ms per event (a' + b' + e' + c')", millis(floor), "", false)
	rr("floor with the inbox claim alone for c'", millis(fl.sum(barePer)-fl.pgWrites+fl.claims), "", false)
	rr("system CPU per event / floor", float64(perEvent)/float64(max(floor, 1)), "", false)
	return nil
}

// systemFloorTime bounds each floor reference's run (e' runs half of it).
const systemFloorTime = 10 * time.Second

// system is one `intake dev` under test.
type system struct {
	dev     *child
	base    string
	dataDir string
	dbURL   string
	pgPort  string
	natsURL string
	pg      int // the postmaster's pid
}

// adminURL is the system's cluster as its superuser, for CREATE DATABASE.
func (s *system) adminURL() string { return s.dbURLOf("postgres") }

// dbURLOf is database db in the system's cluster.
func (s *system) dbURLOf(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/%s", s.pgPort, db)
}

// startSystem starts `intake dev` with a config of its own (the bench
// integration, envelope keys as deployed) and waits until it is ready.
func startSystem(ctx context.Context, c Config, dir string, size int) (*system, error) {
	cfgPath := filepath.Join(dir, fmt.Sprintf("system-%d.yaml", size))
	debug := ""
	if c.ProfileDir != "" {
		debug = "debug: {pprof: true}\n" // profiled during the load (system-{size}.pprof)
	}
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`envelope: {keys: [%q]}
integrations:
  - {name: bench, provider: standard, tenant: bench, account: a, secrets: [%q], max_body_bytes: 1048576}
%s`, benchEnvelopeKey, benchSecret, debug)), 0o600); err != nil {
		return nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	natsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	pgAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, pgPort, _ := net.SplitHostPort(pgAddr)
	s := &system{base: "http://" + httpAddr, dataDir: filepath.Join(dir, fmt.Sprintf("system-%d", size)),
		pgPort: pgPort, natsURL: "nats://" + natsAddr}
	s.dbURL = s.dbURLOf("intake")
	s.dev, err = startChild("dev", c.Binary, filepath.Join(dir, fmt.Sprintf("system-%d.log", size)), nil,
		"dev", "--config", cfgPath, "--data-dir", s.dataDir, "--http-addr", httpAddr, "--nats-addr", natsAddr,
		"--postgres-port", pgPort, "--log-level", "error")
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := s.dev.waitReady(wctx, s.base+"/readyz"); err != nil {
		s.dev.stop()
		return nil, fmt.Errorf("system: intake dev: %w (log: %s)", err, s.dev.log.Name())
	}
	if s.pg, err = postmasterPID(filepath.Join(s.dataDir, "postgres")); err != nil {
		s.dev.stop()
		return nil, err
	}
	return s, nil
}

func (s *system) stop() { s.dev.stop() }

// cpu is the system's CPU time so far: the dev process's own and every
// Postgres process's (postgresCPU: the postmaster, its live backends and
// the ones it reaped).
func (s *system) cpu() (time.Duration, error) {
	pg, err := postgresCPU(s.pg)
	if err != nil {
		return 0, err
	}
	return s.dev.cpu() + pg, nil
}

// drained waits until the inbox holds want events and the outbox has
// nothing left to relay.
func (s *system) drained(ctx context.Context, want int) error {
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		return fmt.Errorf("system: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	deadline := time.Now().Add(systemDrainWait)
	for {
		var inbox, pending int
		err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM intake.inbox), (SELECT count(*) FROM intake.outbox_pending)`).Scan(&inbox, &pending)
		if err != nil {
			return fmt.Errorf("system: drain: %w", err)
		}
		if inbox >= want && pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("system: not drained after %s: %d of %d in the inbox, %d to relay", systemDrainWait, inbox, want, pending)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// postmasterPID reads the postmaster's pid from the postmaster.pid file
// under dir (the private cluster `intake dev` started there).
func postmasterPID(dir string) (int, error) {
	var found string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a directory postgres keeps to itself
		}
		if !d.IsDir() && d.Name() == "postmaster.pid" {
			found = path
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if found == "" {
		return 0, errors.New("system: no postmaster.pid under " + dir)
	}
	b, err := os.ReadFile(found)
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("system: %s: %w", found, err)
	}
	return pid, nil
}
