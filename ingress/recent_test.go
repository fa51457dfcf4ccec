package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/provider"
)

const replayY = `
nats: {publish_timeout: 2s}
ingress:
  trusted_proxies: [127.0.0.1]
  client_ip_header: X-Forwarded-For
integrations:
  - {name: gh, provider: github, tenant: acme, secrets: ["` + githubNew + `"], rate_limit: {per_second: 10, burst: 10}}
`

// TestCapturedDeliveryReplayedDoesNotSpendTheIntegrationsLimit: one signed
// GitHub push (GitHub signs no timestamp and not the delivery id: it
// verifies forever, under any id), captured and replayed in a loop from two
// goroutines of one address — as it was, and under a fresh
// X-GitHub-Delivery each time — while a genuine sender from another address
// stays at half the integration's limit (5/s of 10/s): every genuine
// delivery is accepted. As it was, the capture is published once, its
// repeats answered from memory — 10 duplicates, then 429 repeated, for the
// 2 s it is remembered, and again — and,
// not given their address token back, soon 429 client_rate_limited before
// their body is read. Under fresh ids each copy is a new delivery (the
// processor's replay guard refuses it) and spends a budget of its own, the
// integration's limit again beside the genuine one: past it, 429 repeated.
// Before issue 30 either loop emptied the integration's bucket and the
// genuine deliveries got 429 (10,716 × 429 from two threads in the report).
func TestCapturedDeliveryReplayedDoesNotSpendTheIntegrationsLimit(t *testing.T) {
	for _, tt := range []struct {
		name     string
		freshIDs bool
	}{{"as captured", false}, {"under fresh ids", true}} {
		t.Run(tt.name, func(t *testing.T) { replayCaptured(t, tt.freshIDs) })
	}
}

func replayCaptured(t *testing.T, freshIDs bool) {
	r := startRigYAML(t, replayY, 0)
	via := func(req request, addr string) request {
		req.header = req.header.Clone()
		req.header.Set("X-Forwarded-For", addr)
		return req
	}
	captured := via(r.sign("gh", 0, provider.Message{ID: "d-captured", Type: "push", Body: []byte(`{"ref":"refs/heads/main","after":"c0ffee"}`), Time: time.Now()}), "203.0.113.9")
	if a := r.post("gh", captured); a.code != http.StatusOK || a.status != "accepted" {
		t.Fatalf("the original delivery: %d %s", a.code, a.raw)
	}
	start := time.Now()
	ctx, stop := context.WithCancel(context.Background())
	var loop sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	var n atomic.Int64
	for range 2 {
		loop.Go(func() {
			for ctx.Err() == nil {
				hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/webhooks/gh", bytes.NewReader(captured.body))
				hr.Header = captured.header.Clone()
				if freshIDs {
					hr.Header.Set("X-GitHub-Delivery", fmt.Sprintf("d-fresh-%d", n.Add(1)))
				}
				resp, err := r.client.Do(hr)
				if err != nil {
					continue
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var a struct{ Status, Reason string }
				_ = json.Unmarshal(raw, &a)
				mu.Lock()
				answers[strconv.Itoa(resp.StatusCode)+" "+a.Status+" "+a.Reason]++
				mu.Unlock()
			}
		})
	}
	for i := range 10 {
		time.Sleep(200 * time.Millisecond) // the sender's pace, not a wait for a condition
		body := fmt.Appendf(nil, `{"ref":"refs/heads/main","after":"genuine%d"}`, i)
		req := via(r.sign("gh", 0, provider.Message{ID: fmt.Sprintf("d-genuine-%d", i), Type: "push", Body: body, Time: time.Now()}), "140.82.115.1")
		if a := r.post("gh", req); a.code != http.StatusOK || a.status != "accepted" {
			t.Errorf("genuine delivery %d under the replay: %d %s, want 200 accepted", i, a.code, a.raw)
		}
	}
	stop()
	loop.Wait()
	elapsed := time.Since(start).Seconds()
	t.Logf("the replay's answers in %.1fs: %v", elapsed, answers)
	if answers["429 rejected repeated"] == 0 {
		t.Errorf("no repeat was answered 429 repeated")
	}
	if got := answers["429 rejected rate_limited"]; got > 0 {
		t.Errorf("%d repeats reached the integration's limit", got)
	}
	published := len(r.published("gh"))
	if !freshIDs {
		// 10 from memory for each 2 s the capture is remembered, and the
		// stream's own once it is forgotten.
		if got, most := answers["200 duplicate "], 11*(1+int(elapsed/2)); got < 1 || got > most {
			t.Errorf("%d repeats answered duplicate, want 1 to %d (10 a window, then 429)", got, most)
		}
		if answers["429 rejected client_rate_limited"] == 0 {
			t.Errorf("the replaying address was never limited: its repeats got their token back")
		}
		if published != 11 {
			t.Errorf("published %d, want the captured delivery once and the 10 genuine ones", published)
		}
		return
	}
	// Copies within their own budget (a burst of 10, 10/s) are published
	// for the replay guard to refuse, and one each time the body is
	// forgotten (2 s).
	if copies, most := answers["200 accepted "], 15+int(11*elapsed); copies == 0 || copies > most || published != 11+copies {
		t.Errorf("%d copies accepted, %d published: want the copies within their budget, the capture and the 10 genuine ones", copies, published)
	}
}
