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
// GitHub push (GitHub signs no timestamp: it verifies forever), captured and
// replayed in a loop from two goroutines of one address, while a genuine
// sender from another address stays at half the integration's limit (5/s
// of 10/s): every genuine delivery is accepted, and the capture is
// published once. Its repeats are answered from memory — 10 duplicates,
// then 429 repeated — and, not given their address token back, soon get
// 429 client_rate_limited before their body is read. Before issue 30 the
// loop emptied the integration's bucket and the genuine deliveries got 429
// (10,716 × 429 from two threads in the report). The same capture under
// fresh ids is docs/security.md's open row.
func TestCapturedDeliveryReplayedDoesNotSpendTheIntegrationsLimit(t *testing.T) {
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
	ctx, stop := context.WithCancel(context.Background())
	var loop sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	for range 2 {
		loop.Go(func() {
			for ctx.Err() == nil {
				hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/webhooks/gh", bytes.NewReader(captured.body))
				hr.Header = captured.header.Clone()
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
	t.Logf("the replay's answers: %v", answers)
	if got := answers["200 duplicate "]; got < 1 || got > 10 {
		t.Errorf("%d repeats answered duplicate, want 1 to 10 (then 429)", got)
	}
	if answers["429 rejected repeated"] == 0 {
		t.Errorf("no repeat was answered 429 repeated")
	}
	if answers["429 rejected client_rate_limited"] == 0 {
		t.Errorf("the replaying address was never limited: its repeats got their token back")
	}
	if got := answers["429 rejected rate_limited"]; got > 0 {
		t.Errorf("%d repeats reached the integration's limit", got)
	}
	if got := len(r.published("gh")); got != 11 {
		t.Errorf("published %d, want the captured delivery once and the 10 genuine ones", got)
	}
}
