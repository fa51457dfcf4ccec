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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/natsserver"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/stream"
)

// The durability comparison (Config.Durability, `intake bench
// --durability`): what JetStream's per-write fsync costs Intake, and what
// wins it back. Three JetStream deployments run side by side, each with its
// own `intake ingress`:
//   - default: one node flushing every two minutes, acknowledging at once;
//   - always: one node syncing every write before its PubAck
//     (sync_interval: always, what deploy/ ships);
//   - always R3: three nodes on this host, R3 streams, sync_interval:
//     always — nats-server then syncs once per replication flush, not per
//     write, so concurrent publishes share an fsync.
//
// The same load takes turns between the ingresses in slices, at the usual
// connection count and at four times it (whether more publishes in flight
// recover the cost); raw JetStream publish, sync and async, runs against
// each deployment in turn. The ratios are each against the default.

// syncSide is one deployment with its ingress.
type syncSide struct {
	name string
	nc   *nats.Conn
	js   jetstream.JetStream
	url  string // ingress webhook URL
}

// startSide starts a deployment of nodes nodes (1 or 3) and its ingress;
// stop undoes it.
func startSide(ctx context.Context, c Config, dir string, size int, name string, always bool, nodes int) (s *syncSide, stop func(), err error) {
	var undo []func()
	stop = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	tag := strings.ReplaceAll(name, " ", "-")
	urls, err := startNodes(dir, fmt.Sprintf("%s-%d", tag, size), always, nodes, &undo)
	if err != nil {
		return nil, stop, err
	}
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		return nil, stop, err
	}
	undo = append(undo, nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, stop, err
	}
	sc := config.Stream{Replicas: nodes}.WithDefaults()
	// A new cluster elects its meta leader first: until then stream
	// creation fails.
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = stream.Ensure(cctx, js, sc)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, stop, fmt.Errorf("%s: streams: %w", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Ingress does not use Postgres; the URL only satisfies the config.
	cfgPath := filepath.Join(dir, fmt.Sprintf("intake-%s-%d.yaml", tag, size))
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`nats: {url: %q, stream: {replicas: %d}}
postgres: {url: "postgres://127.0.0.1:1/unused"}
integrations:
  - {name: bench, provider: standard, tenant: bench, account: a, secrets: [%q], max_body_bytes: 1048576}
`, strings.Join(urls, ","), nodes, benchSecret)), 0o600); err != nil {
		return nil, stop, err
	}
	ingAddr, err := freeAddr()
	if err != nil {
		return nil, stop, err
	}
	ing, err := startChild("ingress-"+tag, c.Binary, filepath.Join(dir, fmt.Sprintf("ingress-%s-%d.log", tag, size)), nil,
		"ingress", "--config", cfgPath, "--http-addr", ingAddr, "--log-level", "error")
	if err != nil {
		return nil, stop, err
	}
	undo = append(undo, ing.stop)
	if err := ing.waitReady(ctx, "http://"+ingAddr+"/readyz"); err != nil {
		return nil, stop, err
	}
	return &syncSide{name: name, nc: nc, js: js, url: "http://" + ingAddr + "/webhooks/bench"}, stop, nil
}

// startNodes starts nodes embedded nats-servers, clustered when more than
// one, and returns their client URLs.
func startNodes(dir, tag string, always bool, nodes int, undo *[]func()) ([]string, error) {
	client := make([]string, nodes)
	route := make([]string, nodes)
	for i := range nodes {
		var err error
		if client[i], err = freeAddr(); err != nil {
			return nil, err
		}
		if route[i], err = freeAddr(); err != nil {
			return nil, err
		}
	}
	servers := make([]*natsserver.Embedded, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		cfg := natsserver.Config{Addr: client[i], SyncAlways: always,
			StoreDir: filepath.Join(dir, fmt.Sprintf("nats-%s-n%d", tag, i+1)), ServerName: fmt.Sprintf("%s-n%d", tag, i+1)}
		if nodes > 1 {
			var routes []string
			for j := range nodes {
				if j != i {
					routes = append(routes, "nats-route://"+route[j])
				}
			}
			cfg.Cluster = &natsserver.ClusterConfig{Name: tag, Addr: route[i], Routes: routes}
		}
		// The nodes of a cluster start together: each waits for the others.
		wg.Go(func() { servers[i], errs[i] = natsserver.Run(cfg) })
	}
	wg.Wait()
	urls := make([]string, 0, nodes)
	for _, emb := range servers {
		if emb != nil {
			*undo = append(*undo, emb.Shutdown)
			urls = append(urls, emb.ClientURL())
		}
	}
	return urls, errors.Join(errs...)
}

func runDurability(ctx context.Context, c Config, rep *Report, dir string, size int) error {
	log := c.Log.With("payload", size)
	signing := provider.Config{Provider: "standard", Secrets: []string{benchSecret}}
	type spec struct {
		name   string
		always bool
		nodes  int
	}
	var sides []*syncSide
	for _, sp := range []spec{{"default", false, 1}, {"always", true, 1}, {"always R3", true, 3}} {
		s, stop, err := startSide(ctx, c, dir, size, sp.name, sp.always, sp.nodes)
		if err != nil {
			return err
		}
		defer stop()
		sides = append(sides, s)
	}

	add := func(f Figure) {
		rep.Figures = append(rep.Figures, f)
		log.Info("measured", "stage", f.Stage, "per_second", int(f.Rate), "p99_ms", f.P99Ms)
	}
	ratio := func(name string, v float64) {
		rep.Ratios = append(rep.Ratios, Ratio{Name: name, Payload: size, Value: v})
	}
	nSlices := min(max(int(c.Duration/time.Second), 1), 5)

	for _, conns := range []int{c.Connections, 4 * c.Connections} {
		client := newClient(conns)
		targets := make([]func(int) *requests, len(sides))
		for k, s := range sides {
			targets[k] = func(i int) *requests {
				return newRequests(s.url, signing, size, fmt.Sprintf("%s-%d-%d", strings.ReplaceAll(s.name, " ", ""), conns, i))
			}
		}
		res, err := inTurn(ctx, client, targets, conns, c.Duration, nSlices)
		if err != nil {
			return err
		}
		for k, s := range sides {
			if res[k].Failed > 0 {
				log.Warn("ingress answered non-200", "sync", s.name, "failed", res[k].Failed)
			}
			add(Figure{Stage: fmt.Sprintf("intake ingress, sync %s, %d connections", s.name, conns), Payload: size,
				Rate: res[k].rate(), P50Ms: millis(res[k].pct(.5)), P99Ms: millis(res[k].pct(.99)),
				Note: fmt.Sprintf("in %d slices, taking turns", nSlices)})
			if k > 0 {
				ratio(fmt.Sprintf("ingress, sync %s / default, %d connections", s.name, conns), res[k].rate()/res[0].rate())
			}
		}
	}

	// Raw publish, also taking turns: sync on each deployment, then async.
	body := newRequests("", signing, size, "raw").body("raw")
	subjects := make([]string, len(sides))
	for k, s := range sides {
		var err error
		if subjects[k], err = rawStream(ctx, s.js, size); err != nil {
			return err
		}
	}
	for _, async := range []bool{false, true} {
		rates := make([]float64, len(sides))
		for k, s := range sides {
			var err error
			if async {
				rates[k], err = publishAsync(ctx, s.nc, subjects[k], body, c.Duration/2)
			} else {
				rates[k], err = publishSync(ctx, s.js, subjects[k], body, c.Connections, c.Duration/2)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			mode := fmt.Sprintf("sync, %d in flight", c.Connections)
			if async {
				mode = "async"
			}
			add(Figure{Stage: fmt.Sprintf("raw JetStream publish, %s, sync %s", mode, s.name), Payload: size, Rate: rates[k]})
			if k > 0 {
				ratio(fmt.Sprintf("raw JetStream %s publish, sync %s / default", strings.SplitN(mode, ",", 2)[0], s.name), rates[k]/rates[0])
			}
		}
	}
	for _, s := range sides {
		if err := s.js.DeleteStream(ctx, rawStreamName(size)); err != nil {
			return err
		}
	}
	return nil
}
