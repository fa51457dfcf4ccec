package chaos

import (
	"context"
	"fmt"
	"net/http"
	neturl "net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/intakehq/intake/internal/harness/faultproxy"
)

// Partition mode (Options.Partition): the processors reach Postgres, and
// the ingresses NATS, through a fault proxy each (internal/harness/faultproxy),
// and the faults are two hanging partitions instead of kills and
// restarts: processors ↔ Postgres blackholed for PartitionPostgres, then
// ingress ↔ NATS for PartitionNATS. Flows stay open and silent, and those
// frozen stay dead after the heal: each role must notice by its own
// deadlines and recover without a restart. The verdict adds: /readyz of
// every partitioned role turned 503 during its partition and 200 within
// partitionRecovery after the heal, and no webhook waited longer than
// GitHub's 10s for its answer.
//
// Its negative control (with Control) turns the processors' Postgres
// bounds off in their URL (connect_timeout=0: dials into the partition wait
// indefinitely and fill the pool; no idle_in_transaction_session_timeout:
// a transaction the partition caught keeps its keys locked), which must
// FAIL the verdict (events never processed).

// partitionRecovery bounds, after a heal, the wait for a role's /readyz to
// answer 200 again: a role that takes longer did not recover by its own
// deadlines (with them it takes 0–2s; without them, a minute or never).
const partitionRecovery = 30 * time.Second

// webhookPatience is GitHub's timeout: a webhook not answered within it
// has failed, whatever the answer.
const webhookPatience = 10 * time.Second

// partition is the proxies of a partition run and what it measured.
type partition struct {
	pg, nats *faultproxy.Proxy // processors → Postgres, ingress → NATS

	mu       sync.Mutex
	problems []string // verdict violations
}

// startPartitionProxies puts a proxy in front of Postgres and NATS and
// writes the processors' and the ingresses' configurations through them.
func (h *harness) startPartitionProxies() error {
	pgURL, err := neturl.Parse(h.dbURL)
	if err != nil {
		return err
	}
	natsURL, err := neturl.Parse(h.natsURL())
	if err != nil {
		return err
	}
	p := &partition{}
	if p.pg, err = faultproxy.New(pgURL.Host); err != nil {
		return err
	}
	if p.nats, err = faultproxy.New(natsURL.Host); err != nil {
		_ = p.pg.Close()
		return err
	}
	h.part = p
	cfg, err := os.ReadFile(h.cfgPath)
	if err != nil {
		return err
	}
	procDB := *pgURL
	procDB.Host = p.pg.Addr()
	if h.o.Control {
		q := procDB.Query()
		// The negative control: dials wait indefinitely, no session bound.
		q.Set("connect_timeout", "0")
		q.Set("idle_in_transaction_session_timeout", "")
		procDB.RawQuery = q.Encode()
	}
	ingNATS := *natsURL
	ingNATS.Host = p.nats.Addr()
	for role, r := range map[string]*strings.Replacer{
		"processor": strings.NewReplacer(fmt.Sprintf("%q", h.dbURL), fmt.Sprintf("%q", procDB.String())),
		"ingress":   strings.NewReplacer(fmt.Sprintf("%q", h.natsURL()), fmt.Sprintf("%q", ingNATS.String())),
	} {
		if err := os.WriteFile(h.roleConfig(role), []byte(r.Replace(string(cfg))), 0o600); err != nil {
			return err
		}
	}
	h.logf("partition: processors reach Postgres through %s, ingresses NATS through %s", p.pg.Addr(), p.nats.Addr())
	return nil
}

// roleConfig is the configuration file role's processes run: their own in
// a partition run (URLs through the proxies), else the shared one.
func (h *harness) roleConfig(role string) string {
	if h.part == nil {
		return h.cfgPath
	}
	return h.path("intake-" + role + ".yaml")
}

func (p *partition) violate(format string, args ...any) {
	p.mu.Lock()
	p.problems = append(p.problems, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

func (p *partition) close() {
	_ = p.pg.Close()
	_ = p.nats.Close()
}

// partitionFault blackholes proxy for d while the load runs, watching the
// /readyz of roles: each must turn 503 during it and 200 again after the
// heal, by itself.
func (f *faults) partitionFault(ctx context.Context, what string, proxy *faultproxy.Proxy, d time.Duration, roles []*child) error {
	progress := f.progress()
	start := time.Now()
	proxy.SetMode(faultproxy.Blackhole)
	f.h.note(fmt.Sprintf("partition: %s blackholed for %s", what, d))
	notReady := make([]time.Duration, len(roles))
	var wg sync.WaitGroup
	until := start.Add(d)
	for i, c := range roles {
		wg.Go(func() {
			notReady[i] = -1
			_ = poll(ctx, 250*time.Millisecond, func() error {
				if readyz(c.addr()) != http.StatusOK {
					notReady[i] = time.Since(start)
					return nil
				}
				if time.Now().After(until) {
					return nil
				}
				return fmt.Errorf("ready")
			})
		})
	}
	wg.Wait()
	if err := sleepCtx(ctx, time.Until(until)); err != nil {
		return err
	}
	proxy.SetMode(faultproxy.Pass)
	healed := time.Now()
	for i, c := range roles {
		if notReady[i] < 0 {
			f.h.part.violate("%s: %s's /readyz stayed 200 throughout the partition", what, c.name)
		} else {
			f.h.note(fmt.Sprintf("partition: %s: %s /readyz 503 after %s", what, c.name, notReady[i].Round(100*time.Millisecond)))
		}
	}
	for _, c := range roles {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, partitionRecovery)
			defer cancel()
			err := poll(rctx, 250*time.Millisecond, func() error {
				if readyz(c.addr()) != http.StatusOK {
					return fmt.Errorf("not ready")
				}
				return nil
			})
			if err != nil {
				f.h.part.violate("%s: %s's /readyz not 200 %s after the heal", what, c.name, partitionRecovery)
				return
			}
			f.h.note(fmt.Sprintf("partition: %s: %s ready again %s after the heal", what, c.name, time.Since(healed).Round(100*time.Millisecond)))
		})
	}
	wg.Wait()
	f.record(start, progress, "partition: "+what)
	return nil
}

// readyz is addr's /readyz status; 0 when it did not answer within 5s.
func readyz(addr string) int {
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
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

// answerTimes is the p99 and the max of the webhook answer times the load
// measured, and how many exceeded webhookPatience.
func (l *load) answerTimes() (p99, maxTook time.Duration, late int) {
	l.mu.Lock()
	took := slices.Clone(l.took)
	l.mu.Unlock()
	if len(took) == 0 {
		return 0, 0, 0
	}
	slices.Sort(took)
	for _, d := range took {
		if d > webhookPatience {
			late++
		}
	}
	return took[len(took)*99/100], took[len(took)-1], late
}

// judgePartition adds the partition run's findings to res.
func (h *harness) judgePartition(res *Result, ld *load) {
	if h.part == nil {
		return
	}
	res.Partition = true
	p99, maxTook, late := ld.answerTimes()
	h.note(fmt.Sprintf("partition: webhook answer time p99 %s, max %s", p99.Round(time.Millisecond), maxTook.Round(time.Millisecond)))
	if late > 0 {
		res.violate("partition: %d webhooks answered after GitHub's %s", late, webhookPatience)
	}
	h.part.mu.Lock()
	for _, s := range h.part.problems {
		res.violate("%s", s)
	}
	h.part.mu.Unlock()
}
