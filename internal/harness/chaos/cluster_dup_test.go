package chaos_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/ingress"
	"github.com/intakehq/intake/internal/harness/natsserver"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
)

// TestClusterConcurrentDuplicatesAreAnsweredDuplicate pins what the chaos
// harness's cluster run found: two ingresses receiving the same delivery at
// the same moment, publishing into an R3 stream. The stream leader answers
// the second publish 409 "duplicate message id is in process" (JetStream
// err_code 10158) while the first copy is being replicated; ingress used to
// turn that into 503 for a delivery that was persisted (93 of 100 pairs
// here), where the contract (ARCHITECTURE.md) answers 200 "duplicate".
func TestClusterConcurrentDuplicatesAreAnsweredDuplicate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	urls, _ := startCluster(t)

	nc, err := nats.Connect(urls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "whsec_Y2hhb3MtY2x1c3Rlci1kdXBsaWNhdGUtdGVzdA=="
	cfg, err := config.Parse([]byte(`
nats: {stream: {replicas: 3}, publish_timeout: 5s}
integrations:
  - {name: dup, provider: standard, tenant: acme, account: main, secrets: ["`+secret+`"]}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() bool {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return stream.Ensure(cctx, js, cfg.NATS.Stream) == nil
	}, "R3 streams never created")
	svc, err := ingress.New(ingress.Options{Config: cfg, JS: js, Metrics: telemetry.NewMetrics(), Log: telemetry.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	client := srv.Client()
	t.Cleanup(client.CloseIdleConnections)

	signer := provider.Config{Provider: "standard", Secrets: []string{secret}}
	const events = 100
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range events {
		id := "evt_" + strconv.Itoa(i)
		body := []byte(fmt.Sprintf(`{"id":%q,"type":"invoice.paid"}`, id))
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				hdr, err := provider.Sign(signer, 0, id, body, time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/dup", bytes.NewReader(body))
				req.Header = hdr
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	if codes[http.StatusOK] != 2*events {
		t.Fatalf("answers to %d pairs of concurrent identical deliveries: %v; want all 200 (accepted or duplicate)", events, codes)
	}
}

// startCluster runs three in-process nats-servers joined in a cluster and
// returns their client URLs, comma-separated, and the servers by index.
// Free ports are picked before the servers bind them, so another process
// can take one in between (an outgoing connection's local port, say): the
// cluster is then started again on fresh ports.
func startCluster(t *testing.T) (string, []*natsserver.Embedded) {
	t.Helper()
	var err error
	for range 3 {
		var urls string
		var servers []*natsserver.Embedded
		if urls, servers, err = tryCluster(t); err == nil {
			for _, emb := range servers {
				t.Cleanup(emb.Shutdown)
			}
			return urls, servers
		}
		t.Logf("cluster did not start, trying fresh ports: %v", err)
	}
	t.Fatal(err)
	return "", nil
}

func tryCluster(t *testing.T) (string, []*natsserver.Embedded, error) {
	var client, route [3]int
	for i := range 3 {
		client[i], route[i] = testenv.FreePort(t), testenv.FreePort(t)
	}
	var urls string
	servers := make([]*natsserver.Embedded, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		var routes []string
		for j := range 3 {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", route[j]))
			}
		}
		cfg := natsserver.Config{
			Addr:       fmt.Sprintf("127.0.0.1:%d", client[i]),
			StoreDir:   t.TempDir(),
			ServerName: fmt.Sprintf("n%d", i+1),
			Cluster:    &natsserver.ClusterConfig{Name: "test", Addr: fmt.Sprintf("127.0.0.1:%d", route[i]), Routes: routes},
		}
		if i > 0 {
			urls += ","
		}
		urls += "nats://" + cfg.Addr
		wg.Go(func() { servers[i], errs[i] = natsserver.Run(cfg) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, emb := range servers {
			if emb != nil {
				emb.Shutdown()
			}
		}
		return "", nil, err
	}
	return urls, servers, nil
}
