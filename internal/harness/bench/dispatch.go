package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/dispatcher"
	"github.com/intakehq/intake/internal/harness/pgcluster"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/store"
)

// The dispatcher stage (`intake bench --dispatch`, issue 32): `intake
// dispatcher` as its own process, against an embedded nats-server and the
// private Postgres, delivering to a bare local receiver (receiver.go).
//
// Throughput, for each payload size: a backlog of processed messages is
// put on INTAKE_OUT as the processor's relay publishes them (outPublisher)
// behind the destination's consumer (dispatcher.ConsumerConfig, created by
// the harness first: it takes new messages only), then a dispatcher
// starts and drains it, timed from the receiver's first delivery to the
// last delivery's row in intake.dispatch_attempts. The limit, in the same
// run: a bare net/http client posting bodies of the same size and form,
// max_in_flight at a time, to the same receiver, for Duration/2 a pass
// (about as long as a dispatcher pass: a short pass on a shared host
// samples one busy or idle moment), in a process of its own as the
// dispatcher is (bareclient.go); the same client in this process, beside
// the receiver, is measured too and shown without a target. Passes go own
// process, this process, dispatcher, dispatcher, this process, own
// process, so drift on the host moves them alike. CPU per
// delivery is read from /proc at the first delivery and at the end: the
// dispatcher process's, and every Postgres process's (the log rows).
//
// Then two scenarios judged from the receiver's own record (dispatchfaults.go):
// the destination down for Config.Outage with messages flowing, then
// restored; and the dispatcher killed with SIGKILL Config.DispatchKills
// times while it drains. Every message must arrive, a duplicate only under
// the webhook-id of its first delivery.

// dispatchSecret signs the stage's deliveries (not a published default).
const dispatchSecret = "whsec_YmVuY2gtZGlzcGF0Y2gta2V5LTMyLWJ5dGVzLWxvbmc="

// Defaults of the stage's Config fields.
const (
	DefaultOutage        = 5 * time.Minute
	DefaultQuickOutage   = 5 * time.Second
	DefaultDispatchKills = 3
	DefaultDispatchRate  = 100
)

// scheduleScale is how much shorter --quick's retry schedule and breaker
// probe are than the defaults: a 5 s outage with it is what a 5 min one is
// with the defaults.
const scheduleScale = 60

// dispatchSchedule is the bench destinations' retry schedule and breaker.
type dispatchSchedule struct {
	name    string
	retry   []time.Duration
	breaker config.DestinationBreaker
	scale   time.Duration // 1, or scheduleScale
}

// scheduleFor is the defaults (config.DefaultDestinationRetry, breaker 10
// failures, 30 s probe), or with quick the defaults divided by
// scheduleScale.
func scheduleFor(quick bool) dispatchSchedule {
	s := dispatchSchedule{name: "the defaults", retry: config.DefaultDestinationRetry(),
		breaker: config.DestinationBreaker{Failures: config.DefaultBreakerFailures, Probe: config.DefaultBreakerProbe}, scale: 1}
	if quick {
		s.name, s.scale = fmt.Sprintf("the defaults / %d", scheduleScale), scheduleScale
		for i, w := range s.retry {
			s.retry[i] = (w / scheduleScale).Round(time.Millisecond)
		}
		s.breaker.Probe /= scheduleScale
	}
	return s
}

func (s dispatchSchedule) String() string {
	ws := make([]string, len(s.retry))
	for i, w := range s.retry {
		ws[i] = fmtDuration(w)
	}
	return fmt.Sprintf("%s: retry %s, breaker %d failures, probe %s doubling", s.name, strings.Join(ws, ","),
		s.breaker.Failures, fmtDuration(s.breaker.Probe))
}

// fmtDuration drops time.Duration's zero units: 5m, not 5m0s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// dispatchRun is one `intake bench --dispatch`: its NATS, database and
// base config (a payloadRun's), and what the scenarios share.
type dispatchRun struct {
	c     Config
	rep   *Report
	log   *slog.Logger
	env   *payloadRun
	pgPID int
	sched dispatchSchedule
	base  []byte // the run's config file, without destinations
	// rate1k is the dispatcher's rate at the first payload size: it sizes
	// the kill scenario's backlog.
	rate1k float64
}

// runDispatch measures the throughput at each payload size, then runs the
// outage and the kills. It fails when a scenario's verdict does.
func runDispatch(ctx context.Context, c Config, rep *Report, dir string, pg *pgcluster.Cluster) (*Report, error) {
	env := newPayloadRun(c, rep, dir, c.Payloads[0])
	defer env.stop()
	if err := env.start(ctx, pg); err != nil {
		return rep, err
	}
	base, err := os.ReadFile(env.cfgPath)
	if err != nil {
		return rep, err
	}
	d := &dispatchRun{c: c, rep: rep, log: c.Log.With("stage", "dispatch"), env: env, pgPID: pg.PID(),
		sched: scheduleFor(c.Quick), base: base}
	for _, size := range c.Payloads {
		if err := d.throughput(ctx, size); err != nil {
			return rep, fmt.Errorf("dispatch, payload %d: %w", size, err)
		}
	}
	if c.Outage > 0 {
		if err := d.outage(ctx); err != nil {
			return rep, fmt.Errorf("dispatch, outage: %w", err)
		}
	}
	if c.DispatchKills > 0 {
		if err := d.kills(ctx); err != nil {
			return rep, fmt.Errorf("dispatch, kills: %w", err)
		}
	}
	rep.Duration = time.Since(rep.Started).Round(time.Second).String()
	var failed []string
	for _, ck := range rep.Deliveries {
		if !ck.OK() {
			failed = append(failed, ck.Scenario+": "+ck.Problems())
		}
	}
	if len(failed) > 0 {
		return rep, fmt.Errorf("dispatch: %s", strings.Join(failed, "; "))
	}
	return rep, nil
}

// destination is a bench destination: every message of tenant, to url,
// the stage's in-flight bound and schedule.
func (d *dispatchRun) destination(name, tenant, url string) config.Destination {
	return config.Destination{Name: name, URL: url, Match: config.DestinationMatch{Tenants: []string{tenant}},
		Secrets: []string{dispatchSecret}, MaxInFlight: d.c.DispatchInFlight, Retry: d.sched.retry,
		Breaker: d.sched.breaker}.WithDefaults()
}

// prepare writes dest's config file (the run's, with dest its only
// destination) and creates its consumer as the dispatcher will, so that
// what is published from now on is dest's to deliver.
func (d *dispatchRun) prepare(ctx context.Context, dest config.Destination) (cfgPath string, err error) {
	retry := make([]string, len(dest.Retry))
	for i, w := range dest.Retry {
		retry[i] = w.String()
	}
	cfg := fmt.Sprintf(`%s
destinations:
  - name: %s
    url: %q
    match: {tenants: [%q]}
    secrets: [%q]
    timeout: %s
    max_in_flight: %d
    retry: [%s]
    breaker: {failures: %d, probe: %s}
`, d.base, dest.Name, dest.URL, dest.Match.Tenants[0], dispatchSecret, dest.Timeout, dest.MaxInFlight,
		strings.Join(retry, ", "), dest.Breaker.Failures, dest.Breaker.Probe)
	cfgPath = filepath.Join(d.env.dir, "dispatch-"+dest.Name+".yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return "", err
	}
	if _, err := d.env.js.CreateOrUpdateConsumer(ctx, envelope.StreamOut, dispatcher.ConsumerConfig(dest)); err != nil {
		return "", fmt.Errorf("consumer %s: %w", dest.Durable(), err)
	}
	return cfgPath, nil
}

// startDispatcher starts `intake dispatcher` on cfgPath as its own process
// and returns at once, so that the caller can read its CPU at the first
// delivery; base is its HTTP address (/readyz, /debug/pprof).
func (d *dispatchRun) startDispatcher(cfgPath, logName string) (ch *child, base string, err error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	ch, err = startChild("dispatcher", d.c.Binary, filepath.Join(d.env.dir, logName), nil,
		"dispatcher", "--config", cfgPath, "--http-addr", addr, "--log-level", "info")
	if err != nil {
		return nil, "", err
	}
	d.env.undo = append(d.env.undo, ch.stop)
	return ch, "http://" + addr, nil
}

// settled waits until dest's consumer has nothing left: every message
// acknowledged (or terminated).
func (d *dispatchRun) settled(ctx context.Context, dest config.Destination, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		cons, err := d.env.js.Consumer(ctx, envelope.StreamOut, dest.Durable())
		if err != nil {
			return err
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not settled after %s: %d pending, %d unacknowledged", dest.Durable(), wait, info.NumPending, info.NumAckPending)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// outPublisher puts a scenario's messages on INTAKE_OUT as the processor's
// relay does: Nats-Msg-Id from envelope.OutboxMsgID, the event's identity
// headers, a body of the stage's size that starts with the event id. It
// remembers each message's Nats-Msg-Id: the webhook-id its deliveries
// must carry.
type outPublisher struct {
	js     jetstream.JetStream
	tenant string
	prefix string
	reqs   *requests

	mu   sync.Mutex
	sent map[string]string // event id → Nats-Msg-Id
	next int
}

func newOutPublisher(js jetstream.JetStream, tenant string, size int) *outPublisher {
	return &outPublisher{js: js, tenant: tenant, prefix: tenant, reqs: newRequests("", provider.Config{}, size, ""), sent: map[string]string{}}
}

// msg is the publisher's next message.
func (p *outPublisher) msg() *nats.Msg {
	p.mu.Lock()
	i := p.next
	p.next++
	p.mu.Unlock()
	id := fmt.Sprintf("%s_%d", p.prefix, i)
	k := envelope.Key{Integration: "bench", Account: "a", EventID: id}
	body := p.reqs.body(id)
	m := nats.NewMsg(envelope.SubjectOut(p.tenant, "bench", "bench.event"))
	m.Header.Set(envelope.HeaderMsgID, envelope.OutboxMsgID(k, inbox.ModeOriginal, "", 0))
	m.Header.Set(envelope.HeaderKey, k.String())
	m.Header.Set(envelope.HeaderIntegration, k.Integration)
	m.Header.Set(envelope.HeaderTenant, p.tenant)
	m.Header.Set(envelope.HeaderAccount, k.Account)
	m.Header.Set(envelope.HeaderEventID, id)
	m.Header.Set(envelope.HeaderEventType, "bench.event")
	m.Header.Set(envelope.HeaderPayloadSHA256, envelope.PayloadSHA256(body))
	m.Header.Set(envelope.HeaderReceivedAt, time.Now().UTC().Format(time.RFC3339Nano))
	m.Header.Set(envelope.HeaderExecutionID, store.NewID())
	m.Data = body
	return m
}

// sentOK records a message INTAKE_OUT stored (its PubAck came).
func (p *outPublisher) sentOK(m *nats.Msg) {
	p.mu.Lock()
	p.sent[m.Header.Get(envelope.HeaderEventID)] = m.Header.Get(envelope.HeaderMsgID)
	p.mu.Unlock()
}

// published is a copy of what INTAKE_OUT stored: event id → Nats-Msg-Id.
func (p *outPublisher) published() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]string, len(p.sent))
	for k, v := range p.sent {
		out[k] = v
	}
	return out
}

// ids are the event ids published so far.
func (p *outPublisher) ids() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.sent))
	for id := range p.sent {
		out = append(out, id)
	}
	return out
}

// backlog publishes n messages as fast as INTAKE_OUT takes them (4,096
// PubAcks outstanding) and checks every PubAck: none a duplicate.
func (p *outPublisher) backlog(ctx context.Context, n int) error {
	futures := make([]jetstream.PubAckFuture, 0, 4096)
	await := func() error {
		for _, f := range futures {
			select {
			case ack := <-f.Ok():
				if ack.Duplicate {
					return fmt.Errorf("backlog: %s published twice", f.Msg().Header.Get(envelope.HeaderMsgID))
				}
				p.sentOK(f.Msg())
			case err := <-f.Err():
				return fmt.Errorf("backlog: %w", err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futures = futures[:0]
		return nil
	}
	for range n {
		f, err := p.js.PublishMsgAsync(p.msg())
		if err != nil {
			return fmt.Errorf("backlog: %w", err)
		}
		if futures = append(futures, f); len(futures) == cap(futures) {
			if err := await(); err != nil {
				return err
			}
		}
	}
	return await()
}

// flow publishes rate messages a second, each waiting for its PubAck,
// until stop, which lets the publish in progress finish (a message stored
// on INTAKE_OUT is one the harness knows of) and returns the first error.
func (p *outPublisher) flow(ctx context.Context, rate float64) (stop func() error) {
	quit := make(chan struct{})
	var once sync.Once
	var firstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		for i := 0; ; i++ {
			t := time.NewTimer(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
			select {
			case <-quit:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			m := p.msg()
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			ack, err := p.js.PublishMsg(pctx, m)
			cancel()
			switch {
			case err != nil:
				firstErr = fmt.Errorf("flow: %w", err)
				return
			case ack.Duplicate:
				firstErr = fmt.Errorf("flow: %s published twice", m.Header.Get(envelope.HeaderMsgID))
				return
			}
			p.sentOK(m)
		}
	}()
	return func() error {
		once.Do(func() { close(quit) })
		<-done
		return firstErr
	}
}

// dispatchPass is one timed drain: the bare client's or the dispatcher's.
type dispatchPass struct {
	n    int
	secs float64         // first delivery at the receiver to the end
	lat  []time.Duration // attempt latencies
	cpu  time.Duration   // the sender's: the dispatcher process, the bare client's process, or this process for the in-process client
	self time.Duration   // this process's while another process sends: the receiver (and NATS, for the dispatcher)
	pg   time.Duration   // every postgres process's
	// machine is the machine's busy time (every process and the kernel):
	// the whole bare pass, a dispatcher pass from its first delivery.
	machine time.Duration
	wal     int64
	rss     float64
	// notDelivered counts attempts that did not deliver (a retry).
	notDelivered int
	// pulls and asked are the dispatcher's pull requests and the messages
	// they asked for, counted with ProfileDir only (pullCounter).
	pulls, asked int
}

func sumPasses(ps []dispatchPass) (sum dispatchPass) {
	for _, p := range ps {
		sum.n += p.n
		sum.secs += p.secs
		sum.lat = append(sum.lat, p.lat...)
		sum.cpu += p.cpu
		sum.self += p.self
		sum.pg += p.pg
		sum.machine += p.machine
		sum.wal += p.wal
		sum.rss = max(sum.rss, p.rss)
		sum.notDelivered += p.notDelivered
		sum.pulls += p.pulls
		sum.asked += p.asked
	}
	return sum
}

func (p dispatchPass) rate() float64 { return float64(p.n) / p.secs }

func (p dispatchPass) pct(q float64) time.Duration { return loadResult{Latencies: p.lat}.pct(q) }

func (p dispatchPass) per(d time.Duration) float64 { return millis(d) / float64(p.n) }

// throughput measures the dispatcher against the bare client at one
// payload size.
func (d *dispatchRun) throughput(ctx context.Context, size int) error {
	log := d.log.With("payload", size)
	rc, err := startReceiver("")
	if err != nil {
		return err
	}
	defer rc.close()
	tenant := fmt.Sprintf("tput%d", size)
	dest := d.destination("tput-"+fmt.Sprint(size), tenant, rc.url())
	cfgPath, err := d.prepare(ctx, dest)
	if err != nil {
		return err
	}
	client := bareClient(dest.MaxInFlight)
	defer client.CloseIdleConnections()
	reqs := newRequests("", provider.Config{}, size, "")
	n := d.c.DispatchMessages
	if n == 0 {
		// Sized so that each dispatcher pass lasts about Duration/2 at half
		// the bare client's rate.
		cal, err := bareRun(ctx, rc, client, reqs, fmt.Sprintf("cal%d", size), 1<<30, dest.MaxInFlight, time.Now().Add(time.Second))
		if err != nil {
			return err
		}
		n = min(max(int(cal.rate()*d.c.Duration.Seconds()/4), 1000), 500000)
	}
	pub := newOutPublisher(d.env.js, tenant, size)
	t0, err := leafSize(ctx, d.env.st, logTable)
	if err != nil {
		return err
	}
	// The limit, the bare client in its own process, first and last; the
	// same client in the receiver's process next to it; the dispatcher's
	// two passes in the middle, so that a host speeding up or slowing
	// down moves both sides alike.
	var bare, inProc, disp []dispatchPass
	for i, kind := range []string{"process", "in-process", "dispatcher", "dispatcher", "in-process", "process"} {
		var (
			p   dispatchPass
			err error
		)
		switch kind {
		case "dispatcher":
			p, err = d.dispatchPass(ctx, rc, dest, cfgPath, pub, n, len(disp) == 0, i)
			disp = append(disp, p)
		case "in-process":
			p, err = bareRun(ctx, rc, client, reqs, fmt.Sprintf("bare%d_%d", size, i), 1<<30, dest.MaxInFlight, time.Now().Add(d.c.Duration/2))
			inProc = append(inProc, p)
		case "process":
			p, err = d.bareProcessRun(ctx, rc, size, dest.MaxInFlight, fmt.Sprintf("barep%d_%d", size, i), d.c.Duration/2)
			bare = append(bare, p)
		}
		if err != nil {
			return err
		}
		log.Info("throughput pass", "pass", i+1, "sender", kind, "per_second", int(p.rate()))
	}
	t1, err := leafSize(ctx, d.env.st, logTable)
	if err != nil {
		return err
	}
	parts, err := d.parts(ctx, size, n, rc.url())
	if err != nil {
		return err
	}
	b, ip, s := sumPasses(bare), sumPasses(inProc), sumPasses(disp)
	if size == d.c.Payloads[0] {
		d.rate1k = s.rate()
	}
	note := fmt.Sprintf("backlog %d × 2 passes, first delivery to last log row; CPU per delivery: dispatcher %.3f ms + postgres %.3f ms (this process: receiver + NATS %.3f ms; %s); %.0f WAL bytes",
		n, s.per(s.cpu), s.per(s.pg), s.per(s.self), machineNote(s.machine/time.Duration(s.n), "delivery"), float64(s.wal)/float64(s.n))
	if s.notDelivered > 0 {
		note += fmt.Sprintf("; %d attempts not delivered (retried)", s.notDelivered)
	}
	if s.pulls > 0 {
		note += fmt.Sprintf("; %d pull requests, %.1f messages asked per pull, %.2f per delivery", s.pulls, float64(s.asked)/float64(s.pulls), float64(s.pulls)/float64(s.n))
	}
	d.rep.Figures = append(d.rep.Figures,
		Figure{Stage: "bare HTTP client → receiver (limit)", Payload: size, Rate: b.rate(), P50Ms: millis(b.pct(.5)), P99Ms: millis(b.pct(.99)),
			Note: fmt.Sprintf("its own process, as the dispatcher; 2 passes of %s, %d in flight; CPU per request: client %.3f ms (this process, the receiver: %.3f; %s)",
				d.c.Duration/2, dest.MaxInFlight, b.per(b.cpu), b.per(b.self), machineNote(b.machine/time.Duration(b.n), "request"))},
		Figure{Stage: "bare HTTP client in the receiver's process", Payload: size, Rate: ip.rate(), P50Ms: millis(ip.pct(.5)), P99Ms: millis(ip.pct(.99)),
			Note: fmt.Sprintf("2 passes of %s, %d in flight; %.3f ms CPU per request (this process: client + receiver; %s)",
				d.c.Duration/2, dest.MaxInFlight, ip.per(ip.cpu), machineNote(ip.machine/time.Duration(ip.n), "request"))},
		Figure{Stage: "NATS: take and acknowledge (reference g)", Payload: size, Rate: parts.takeRate,
			Note: fmt.Sprintf("%d messages on a destination's consumer, fetched %d at a time, each acknowledged; %s", n, 2*dest.MaxInFlight, machineNote(parts.take.machine, "message"))},
		Figure{Stage: "delivery log rows (reference h)", Payload: size, Rate: parts.logRate,
			Note: fmt.Sprintf("%d first-attempt rows, a COPY of 64 at a time; %s (this process, the client: %.3f, postgres %.3f)",
				n, machineNote(parts.log.machine, "row"), millis(parts.log.self), millis(parts.log.pg))},
		Figure{Stage: "intake dispatcher → receiver", Payload: size, Rate: s.rate(), P50Ms: logMillis(s.pct(.5)), P99Ms: logMillis(s.pct(.99)), RSSMB: s.rss,
			Note: note + "; latency from the delivery log, whole ms shown as the middle of the ms"})
	nd := float64(s.n)
	d.rep.Postgres = append(d.rep.Postgres, PGCost{Stage: "intake dispatcher (delivery log)", Payload: size, Events: s.n,
		WALBytes: float64(s.wal) / nd, CPUMicros: 1000 * s.per(s.pg),
		Tables: []TableCost{{Table: logTable, Rows: float64(t1.rows-t0.rows) / nd, IndexEntries: float64(t1.entries-t0.entries) / nd,
			TableBytes: float64(t1.tableBytes-t0.tableBytes) / nd, IndexBytes: float64(t1.indexBytes-t0.indexBytes) / nd}}})
	ratio := s.rate() / b.rate()
	met := ratio >= 0.5
	// Shown, not targets: what the cores allow the dispatcher at its parts'
	// CPU per delivery, and its own CPU per delivery over theirs.
	floor := b.machine/time.Duration(b.n) + parts.take.machine + parts.log.machine
	d.rep.Ratios = append(d.rep.Ratios,
		Ratio{Name: "dispatcher / bare HTTP client", Payload: size, Value: ratio, Target: ">= 0.50", Met: &met},
		Ratio{Name: "dispatcher / bare HTTP client in the receiver's process", Payload: size, Value: s.rate() / ip.rate()},
		Ratio{Name: "dispatcher / bare HTTP client, the most the cores allow", Payload: size, Value: mostRate(floor) / b.rate()},
		Ratio{Name: "dispatcher CPU per delivery / bare + (g) + (h)", Payload: size, Value: float64(s.machine) / float64(s.n) / float64(floor)},
		Ratio{Name: "dispatcher CPU ms per delivery (process + postgres)", Payload: size, Value: s.per(s.cpu + s.pg)})
	return nil
}

// logTable is the delivery log, the dispatcher's one table.
const logTable = "intake.dispatch_attempts"

// logMillis is a latency the delivery log holds in whole milliseconds (k:
// at least k ms, under k+1), as the middle of its millisecond.
func logMillis(d time.Duration) float64 { return millis(d) + 0.5 }

// bareRun posts n bodies (or until deadline, when set), conns at a time,
// to the receiver from this process.
func bareRun(ctx context.Context, rc *receiver, client *http.Client, reqs *requests, prefix string, n, conns int, deadline time.Time) (dispatchPass, error) {
	rc.reset()
	cpu0 := cpuMeter{}.read()
	lat, err := postFor(ctx, client, rc.url(), reqs, prefix, n, conns, deadline)
	if err != nil {
		return dispatchPass{}, fmt.Errorf("bare client: %w", err)
	}
	got, first, last := rc.count()
	if got == 0 {
		return dispatchPass{}, errors.New("bare client: the receiver got nothing")
	}
	cpu := cpuMeter{}.read().sub(cpu0)
	// The receiver's first to last delivery, as for the client in its own
	// process (bareProcessRun).
	return dispatchPass{n: got, secs: last.Sub(first).Seconds(), lat: lat, cpu: cpu.self, machine: cpu.machine}, nil
}

// postFor posts n bodies (or until deadline, when set), conns at a time,
// to url: the bare client, in this process or in its own
// (RunBareClient). It returns the latency of each request answered 204.
func postFor(ctx context.Context, client *http.Client, url string, reqs *requests, prefix string, n, conns int, deadline time.Time) ([]time.Duration, error) {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	for range conns {
		wg.Go(func() {
			var mine []time.Duration
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(n) || (!deadline.IsZero() && time.Now().After(deadline)) {
					return
				}
				err := postBare(ctx, client, url, reqs.body(fmt.Sprintf("%s_%d", prefix, i)), &mine)
				if err != nil {
					mu.Lock()
					firstErr = cmpOr(firstErr, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return lat, firstErr
}

// postBare is one request of the bare client: the body, its content
// type, a 204 expected.
func postBare(ctx context.Context, client *http.Client, url string, body []byte, lat *[]time.Duration) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	*lat = append(*lat, time.Since(start))
	return nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// dispatchPass drains a fresh backlog of n messages with a dispatcher
// started for it.
func (d *dispatchRun) dispatchPass(ctx context.Context, rc *receiver, dest config.Destination, cfgPath string, pub *outPublisher, n int, profile bool, pass int) (dispatchPass, error) {
	var lastID int64
	if err := d.env.st.Pool().QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM intake.dispatch_attempts`).Scan(&lastID); err != nil {
		return dispatchPass{}, err
	}
	if err := pub.backlog(ctx, n); err != nil {
		return dispatchPass{}, err
	}
	rc.reset()
	firstCh := rc.firstDelivery()
	pulls, err := d.countPulls(dest)
	if err != nil {
		return dispatchPass{}, err
	}
	defer pulls.stop()
	ch, base, err := d.startDispatcher(cfgPath, fmt.Sprintf("dispatcher-%s-%d.log", dest.Name, pass))
	if err != nil {
		return dispatchPass{}, err
	}
	defer ch.stop()
	// The marks at the first delivery: the dispatcher's start-up is not
	// its deliveries' cost.
	marks0 := make(chan cpuMarks, 1)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		select {
		case <-firstCh:
			marks0 <- d.marks(ctx, ch)
		case <-quit:
		}
	}()
	if err := ch.waitReady(ctx, base+"/readyz"); err != nil {
		return dispatchPass{}, err
	}
	profiled := func() {}
	if profile {
		profiled = d.c.profile(base, d.c.Duration/2, fmt.Sprintf("dispatcher-%d.pprof", pub.reqs.size))
	}
	defer profiled() // a no-op once called below
	// Every delivery at the receiver, then every row in the log.
	deadline := time.Now().Add(10 * time.Minute)
	for {
		got, _, _ := rc.count()
		if got >= n {
			break
		}
		if ch.exited() {
			return dispatchPass{}, fmt.Errorf("dispatcher exited during the drain (log %s)", ch.log.Name())
		}
		if time.Now().After(deadline) {
			return dispatchPass{}, fmt.Errorf("the receiver got %d of %d deliveries in 10 minutes", got, n)
		}
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
			return dispatchPass{}, err
		}
	}
	for {
		var rows int
		if err := d.env.st.Pool().QueryRow(ctx, `SELECT count(*) FROM intake.dispatch_attempts WHERE id > $1 AND destination = $2 AND outcome = 'delivered'`,
			lastID, dest.Name).Scan(&rows); err != nil {
			return dispatchPass{}, err
		}
		if rows >= n {
			break
		}
		if time.Now().After(deadline) {
			return dispatchPass{}, fmt.Errorf("%d of %d log rows written in 10 minutes", rows, n)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return dispatchPass{}, err
		}
	}
	end := time.Now()
	m1 := d.marks(ctx, ch)
	pullsN, asked := pulls.stop()
	var m0 cpuMarks
	select {
	case m0 = <-marks0:
	case <-ctx.Done():
		return dispatchPass{}, ctx.Err()
	}
	if err := errors.Join(m0.err, m1.err); err != nil {
		return dispatchPass{}, err
	}
	_, first, _ := rc.count()
	cpu := m1.cpu.sub(m0.cpu)
	p := dispatchPass{n: n, secs: end.Sub(first).Seconds(), cpu: cpu.child, self: cpu.self,
		pg: m1.pg.cpu - m0.pg.cpu, machine: cpu.machine, wal: m1.pg.wal - m0.pg.wal, rss: ch.peakRSS(), pulls: pullsN, asked: asked}
	rows, err := d.env.st.Pool().Query(ctx, `SELECT latency_ms, outcome = 'delivered' FROM intake.dispatch_attempts WHERE id > $1 AND destination = $2`, lastID, dest.Name)
	if err != nil {
		return dispatchPass{}, err
	}
	var ms int
	var delivered bool
	if _, err := pgx.ForEachRow(rows, []any{&ms, &delivered}, func() error {
		p.lat = append(p.lat, time.Duration(ms)*time.Millisecond)
		if !delivered {
			p.notDelivered++
		}
		return nil
	}); err != nil {
		return dispatchPass{}, err
	}
	profiled()
	ch.stop() // drains: what it holds is acknowledged
	return p, d.settled(ctx, dest, 30*time.Second)
}

// pullCounter counts a consumer's pull requests and the messages they ask
// for, as a plain subscriber to the JetStream API subject they are sent
// on. Profiling only (Config.ProfileDir): the copy of each request costs
// NATS a little.
type pullCounter struct {
	sub          *nats.Subscription
	mu           sync.Mutex
	pulls, asked int
}

func (d *dispatchRun) countPulls(dest config.Destination) (*pullCounter, error) {
	pc := &pullCounter{}
	if d.c.ProfileDir == "" {
		return pc, nil
	}
	var err error
	pc.sub, err = d.env.nc.Subscribe("$JS.API.CONSUMER.MSG.NEXT."+envelope.StreamOut+"."+dest.Durable(), func(m *nats.Msg) {
		var req struct {
			Batch int `json:"batch"`
		}
		_ = json.Unmarshal(m.Data, &req)
		pc.mu.Lock()
		pc.pulls++
		pc.asked += req.Batch
		pc.mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	return pc, d.env.nc.Flush()
}

// stop ends the count (again: nothing more) and returns it.
func (pc *pullCounter) stop() (pulls, asked int) {
	if pc.sub != nil {
		_ = pc.sub.Unsubscribe()
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.pulls, pc.asked
}

// cpuMarks are the CPU times a dispatcher pass reads at its first delivery
// and at its end.
type cpuMarks struct {
	cpu cpuReading // the machine's, this process's, the dispatcher's (child)
	pg  pgMark
	err error
}

func (d *dispatchRun) marks(ctx context.Context, ch *child) cpuMarks {
	m := cpuMarks{cpu: cpuMeter{child: ch}.read()}
	m.pg, m.err = markPG(ctx, d.env.st, d.pgPID)
	return m
}
