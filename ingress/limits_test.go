package ingress_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/intakehq/intake/ingress"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/internal/httpserver"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
)

// The hostile inputs of issue 14's "pre-auth denial of service" and
// "permanent 503", each as an attacker sent it.

const floodY = `
nats: {publish_timeout: 2s}
ingress: {client_rate_limit: {per_second: -1}}
integrations:
  - {name: str, provider: stripe, tenant: acme, secrets: ["` + stripeNew + `"], rate_limit: {per_second: 10, burst: 10}}
`

// TestUnsignedFloodDoesNotSpendTheIntegrationsLimit: an unsigned flood at
// 20× the integration's limit (the per-address limit off, as from many
// addresses) while a genuine sender stays under it: every genuine delivery
// is accepted. Before issue 14 the flood emptied the bucket and genuine
// deliveries got 429.
func TestUnsignedFloodDoesNotSpendTheIntegrationsLimit(t *testing.T) {
	r := startRigYAML(t, floodY, 0)
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()
	var flood sync.WaitGroup
	unsigned := 0
	var mu sync.Mutex
	start := time.Now()
	for range 8 { // 8 × 40/s = 320/s offered; at least 200/s (20× the limit of 10/s) checked below
		flood.Go(func() {
			tick := time.NewTicker(25 * time.Millisecond)
			defer tick.Stop()
			for ctx.Err() == nil {
				<-tick.C
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/webhooks/str", strings.NewReader(`{"id":"evt_forged"}`))
				req.Header.Set("Stripe-Signature", "t=1,v1=00")
				resp, err := r.client.Do(req)
				if err != nil {
					continue
				}
				resp.Body.Close()
				mu.Lock()
				if resp.StatusCode == http.StatusUnauthorized {
					unsigned++
				}
				mu.Unlock()
			}
		})
	}
	// Genuine deliveries at 5/s, half the limit, while the flood runs.
	for i := range 10 {
		time.Sleep(200 * time.Millisecond) // the sender's pace, not a wait for a condition
		body := fmt.Appendf(nil, `{"id":"evt_genuine_%d","object":"event","type":"charge.updated"}`, i)
		req := r.sign("str", 0, provider.Message{Body: body, Time: time.Now()})
		if a := r.post("str", req); a.code != http.StatusOK {
			t.Errorf("genuine delivery %d under the flood: %d %s, want 200", i, a.code, a.raw)
		}
	}
	elapsed := time.Since(start)
	stop()
	flood.Wait()
	rate := float64(unsigned) / elapsed.Seconds()
	t.Logf("flood: %d unsigned requests answered 401 in %s (%.0f/s)", unsigned, elapsed.Round(time.Millisecond), rate)
	if rate < 200 {
		t.Errorf("the flood reached %.0f/s, want at least 200/s (20× the limit)", rate)
	}
	if got := len(r.published("str")); got != 10 {
		t.Errorf("published %d, want the 10 genuine deliveries", got)
	}
}

const clientLimitY = `
nats: {publish_timeout: 2s}
ingress:
  client_rate_limit: {per_second: 0.01, burst: 5}
  trusted_proxies: [127.0.0.1]
  client_ip_header: X-Forwarded-For
integrations:
  - {name: std, provider: standard, tenant: acme, secrets: ["` + whsecNew + `"]}
`

// TestClientAddressLimit: the per-address limit before verification spends
// only what fails verification, keyed by the address the trusted proxy
// names (the rig's peer, 127.0.0.1, is the proxy here).
func TestClientAddressLimit(t *testing.T) {
	r := startRigYAML(t, clientLimitY, 0)
	via := func(req request, addr string) request {
		req.header = req.header.Clone()
		req.header.Set("X-Forwarded-For", addr+", 127.0.0.1")
		return req
	}
	forged := request{header: hdr("webhook-id", "msg_x", "webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10), "webhook-signature", "v1,AAAA"), body: []byte(`{}`)}
	for i := range 5 {
		if a := r.post("std", via(forged, "203.0.113.9")); a.code != http.StatusUnauthorized {
			t.Fatalf("forged request %d within the address's burst: %d %s, want 401", i, a.code, a.raw)
		}
	}
	a := r.post("std", via(forged, "203.0.113.9"))
	if a.code != http.StatusTooManyRequests || a.reason != "client_rate_limited" || a.header.Get("Retry-After") == "" {
		t.Fatalf("forged request over the address's limit: %d %s Retry-After %q, want 429 client_rate_limited", a.code, a.raw, a.header.Get("Retry-After"))
	}
	// Another address is not affected, and a genuine sender's verified
	// deliveries give their tokens back: 12 in a row with a burst of 5.
	for i := range 12 {
		body := fmt.Appendf(nil, `{"n":%d}`, i)
		req := r.sign("std", 0, provider.Message{ID: fmt.Sprintf("msg_%d", i), Body: body, Time: time.Now()})
		if a := r.post("std", via(req, "198.51.100.7")); a.code != http.StatusOK {
			t.Fatalf("genuine delivery %d from another address: %d %s", i, a.code, a.raw)
		}
	}
}

// TestJSONBombIsRefusedBeforeParsing: a signed 1 MiB body of '[' answers
// 400 too_deep and the process lives on (before issue 14 it cost 226 MB,
// and deeper nesting overflowed the stack).
func TestJSONBombIsRefusedBeforeParsing(t *testing.T) {
	r := startRig(t)
	bomb := bytes.Repeat([]byte("["), 1<<20-1)
	for _, req := range []request{
		r.sign("str", 0, provider.Message{Body: bomb, Time: time.Now()}),
		{header: http.Header{}, body: bomb}, // unsigned: refused the same way
		r.sign("str", 0, provider.Message{Body: []byte(`{"id":"evt_deep","a":` + strings.Repeat("[", 65) + strings.Repeat("]", 65) + `}`), Time: time.Now()}),
	} {
		if a := r.post("str", req); a.code != http.StatusBadRequest || a.reason != "too_deep" {
			t.Errorf("nested body: %d %s, want 400 too_deep", a.code, a.raw)
		}
	}
	// Signed for every provider: each reads fields from the body its own
	// way (Stripe and Slack in the verifier, hmac by configured paths).
	for _, name := range []string{"std", "svx", "gh", "shop", "slk", "hm"} {
		req := r.sign(name, 0, provider.Message{ID: "bomb", Type: "orders/updated", Body: bomb, Time: time.Now()})
		if a := r.post(name, req); a.code != http.StatusBadRequest || a.reason != "too_deep" {
			t.Errorf("%s: 1 MiB of '[': %d %s, want 400 too_deep", name, a.code, a.raw)
		}
	}
	ok := r.sign("str", 0, provider.Message{Body: []byte(`{"id":"evt_after","s":"[[[[` + strings.Repeat("[", 100) + `","a":` + strings.Repeat("[", 60) + strings.Repeat("]", 60) + `}`), Time: time.Now()})
	if a := r.post("str", ok); a.code != http.StatusOK {
		t.Fatalf("a delivery after the bomb (brackets inside a string, nesting 61): %d %s", a.code, a.raw)
	}
	if got := len(r.published("str")); got != 1 {
		t.Fatalf("published %d, want 1", got)
	}
}

const budgetY = `
nats: {publish_timeout: 2s}
ingress: {max_body_bytes: 16384, max_inflight_body_bytes: 32768, client_rate_limit: {per_second: -1}}
integrations:
  - {name: std, provider: standard, tenant: acme, secrets: ["` + whsecNew + `"]}
`

// slowUpload opens a connection and sends a request declaring size bytes
// and sends sent of them, then stalls; the answer, when one comes, is
// returned on the channel (0: none before the connection ended).
func slowUpload(t *testing.T, base string, size, sent int) (net.Conn, <-chan int) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /webhooks/std HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
	if _, err := c.Write(bytes.Repeat([]byte(" "), sent)); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			got <- 0
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	return c, got
}

// TestInflightBodyBudget: two stalled uploads hold the whole budget; a
// third request is answered 503 + Retry-After before its body is read, and
// once they have stalled for a second a genuine delivery cuts one and is
// accepted.
func TestInflightBodyBudget(t *testing.T) {
	r := startRigYAML(t, budgetY, 0)
	var first, second <-chan int
	for attempt := 1; ; attempt++ {
		var full bool
		first, second, full = fillBudget(t, r)
		if full {
			break
		}
		if attempt == 5 {
			t.Fatal("no 503 while two stalled uploads held the budget, in 5 attempts")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		req := r.sign("std", 0, provider.Message{ID: "msg_genuine", Body: []byte(`{"ok":true}`), Time: time.Now()})
		a := r.post("std", req)
		if a.code == http.StatusOK {
			break
		}
		if a.code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("genuine delivery beside stalled uploads: %d %s", a.code, a.raw)
		}
		time.Sleep(100 * time.Millisecond) // Retry-After says 1s; the test asks sooner
	}
	// One stalled upload made room; it was cut and answered.
	var code int
	select {
	case code = <-first:
	case code = <-second:
	case <-time.After(5 * time.Second):
		t.Fatal("no stalled upload was cut")
	}
	if code != http.StatusServiceUnavailable {
		t.Errorf("the cut upload was answered %d, want 503", code)
	}
}

// fillBudget opens two stalled uploads that hold budgetY's whole budget and
// posts an unsigned 8000-byte request until it is answered 503 +
// Retry-After. The server reserves for the stalled uploads once it has read
// their headers, which may come after a request of ours (401: it found room,
// and was unsigned). Should the machine be slow enough that the stalled reads
// have been reserved for slowGrace first, they may be cut to make room, and
// the attempt proves nothing: false, the uploads closed, to be tried again.
func fillBudget(t *testing.T, r *rig) (first, second <-chan int, full bool) {
	t.Helper()
	c1, first := slowUpload(t, r.base, 16384, 100)
	c2, second := slowUpload(t, r.base, 16384, 100)
	opened := time.Now()
	big := bytes.Repeat([]byte("x"), 8000)
	for time.Since(opened) < 900*time.Millisecond {
		resp, err := r.client.Post(r.base+"/webhooks/std", "application/json", bytes.NewReader(big))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusServiceUnavailable:
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("a request over the budget: 503 without Retry-After")
			}
			if time.Since(opened) >= 900*time.Millisecond {
				break
			}
			select {
			case <-first: // refused at once: the last attempt's reads held the room
			case <-second:
			default:
				return first, second, true
			}
		case http.StatusUnauthorized:
		default:
			t.Fatalf("a request over the budget: %d, want 503 with Retry-After", resp.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the budget was not seen held by the stalled uploads within 900 ms of opening them (a slow machine): again")
	c1.Close()
	c2.Close()
	return nil, nil, false
}

// TestConnectionCap: with the cap reached, a new connection is answered
// 503 + Retry-After at once and closed; a freed slot takes requests again.
func TestConnectionCap(t *testing.T) {
	r := startRigYAML(t, fmt.Sprintf(testIngressY, whpk), 2)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", strings.TrimPrefix(r.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	r.client.CloseIdleConnections()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Post(r.base+"/webhooks/std", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatalf("over the connection cap: %v, want an answer", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over the connection cap: %d Retry-After %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	held[0].Close()
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := client.Post(r.base+"/webhooks/std", "application/json", strings.NewReader(`{}`))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a connection closed: %v, want 401 (unsigned)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	held[1].Close()
}

// defaultNATS is a nats-server with its defaults (max_payload 1 MB) and
// JetStream, the server an operator gets without Intake's configuration.
func defaultNATS(t *testing.T) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}

// TestPayloadSizeAgreement: against a default nats-server (max_payload
// 1 MB) the default configuration starts, its body limit lowered to
// max_payload - HeaderAllowance with one log line, and a body of exactly
// that size is accepted while one byte more is 413 — never the endless 503
// the server's refusal used to cause. A 1 MiB limit the file sets, for the
// integration or for all, is refused at start, naming the integration and
// both numbers.
func TestPayloadSizeAgreement(t *testing.T) {
	url := defaultNATS(t)
	_, js := testrig.Connect(t, url)
	y := `
nats: {publish_timeout: 2s}
%s
integrations:
  - {name: std, provider: standard, tenant: acme, secrets: ["` + whsecNew + `"]%s}
`
	cfg := testrig.ParseConfig(t, fmt.Sprintf(y, "", ""))
	if err := stream.Ensure(context.Background(), js, cfg.NATS.Stream); err != nil {
		t.Fatal(err)
	}
	maxPayload := js.Conn().MaxPayload()
	if maxPayload != 1<<20 {
		t.Fatalf("max_payload %d, want a stock nats-server's 1048576", maxPayload)
	}
	for _, set := range []struct{ ingress, integration string }{
		{"", ", max_body_bytes: 1048576"},
		{"ingress: {max_body_bytes: 1048576}", ""},
	} {
		_, err := ingress.New(ingress.Options{Config: testrig.ParseConfig(t, fmt.Sprintf(y, set.ingress, set.integration)), JS: js, Log: telemetry.Discard()})
		if !errors.Is(err, ingress.ErrPayloadTooSmall) {
			t.Fatalf("1 MiB limit set (%q%q) against max_payload %d: err %v, want ErrPayloadTooSmall", set.ingress, set.integration, maxPayload, err)
		}
		for _, want := range []string{"integration std", "1048576", strconv.FormatInt(maxPayload, 10)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	}

	log := &recordLog{}
	svc, err := ingress.New(ingress.Options{Config: cfg, JS: js, Log: slog.New(log)})
	if err != nil {
		t.Fatalf("the default configuration against a default nats-server: %v", err)
	}
	limit := maxPayload - ingress.HeaderAllowance
	if in, _ := svc.Integration("std"); in.MaxBodyBytes != limit {
		t.Fatalf("max_body_bytes in force %d, want max_payload %d - %d", in.MaxBodyBytes, maxPayload, ingress.HeaderAllowance)
	}
	if cfg.Integrations[0].MaxBodyBytes != config.DefaultMaxBodyBytes {
		t.Errorf("ingress.New wrote the sized limit into the caller's config")
	}
	if n := len(log.lines); n != 1 || !hasAttr(log.lines[0], "integration", "std") || !hasAttr(log.lines[0], "max_body_bytes", strconv.FormatInt(limit, 10)) {
		t.Errorf("log %v, want one line naming the integration and its limit", log.lines)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.New(ln.Addr().String(), svc.Handler(), cfg.Ingress.Timeouts())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		// Shutdown, not Close: it waits for the 413's connection, which
		// net/http lingers on to drain the unread body.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	r := &rig{t: t, cfg: cfg, base: "http://" + ln.Addr().String(), js: js, client: &http.Client{Timeout: 10 * time.Second}}

	body := func(n int64) []byte {
		return append(append([]byte(`{"p":"`), bytes.Repeat([]byte("p"), int(n)-8)...), '"', '}')
	}
	over := r.sign("std", 0, provider.Message{ID: "msg_over", Body: body(limit + 1), Time: time.Now()})
	if a := r.post("std", over); a.code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body of max_body_bytes + 1 (%d): %d %s, want 413", limit+1, a.code, a.raw)
	}
	// The largest body the limit admits fits the server, with its headers.
	fits := r.sign("std", 0, provider.Message{ID: "msg_fits", Body: body(limit), Time: time.Now()})
	if a := r.post("std", fits); a.code != http.StatusOK {
		t.Fatalf("a body of exactly max_body_bytes (%d): %d %s, want 200", limit, a.code, a.raw)
	}
}

// hasAttr reports whether attrs hold key with the value v (as text).
func hasAttr(attrs []slog.Attr, key, v string) bool {
	for _, a := range attrs {
		if a.Key == key && a.Value.String() == v {
			return true
		}
	}
	return false
}

// TestIdleConnectionsMakeRoomAtTheCap: with the cap filled by keep-alive
// connections idle between requests (as a client holding sockets would
// fill it), a new connection takes the place of the one idle longest
// instead of getting 503; a connection busy or freshly idle is not closed.
func TestIdleConnectionsMakeRoomAtTheCap(t *testing.T) {
	r := startRigYAML(t, fmt.Sprintf(testIngressY, whpk), 2)
	r.client.CloseIdleConnections()
	keepAlive := func() *http.Client {
		tr := &http.Transport{MaxIdleConnsPerHost: 1}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Timeout: 5 * time.Second, Transport: tr}
	}
	n := 0
	post := func(c *http.Client) int {
		t.Helper()
		n++
		req := r.sign("std", 0, provider.Message{ID: fmt.Sprintf("msg_idle_%d", n), Body: []byte(`{"ok":true}`), Time: time.Now()})
		hr, err := http.NewRequest(http.MethodPost, r.base+"/webhooks/std", bytes.NewReader(req.body))
		if err != nil {
			t.Fatal(err)
		}
		hr.Header = req.header.Clone()
		resp, err := c.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// Accepted deliveries keep their connections open (keep-alive).
	a, b := keepAlive(), keepAlive()
	for _, c := range []*http.Client{a, b} {
		if code := post(c); code != http.StatusOK {
			t.Fatalf("filling the cap: %d, want 200", code)
		}
	}
	// Both connections are idle now, but only just: a new one is refused.
	if code := post(keepAlive()); code != http.StatusServiceUnavailable {
		t.Fatalf("at the cap with fresh idle connections: %d, want 503", code)
	}
	time.Sleep(1100 * time.Millisecond) // past idleEvictAfter
	if code := post(keepAlive()); code != http.StatusOK {
		t.Fatalf("at the cap with long-idle connections: %d, want 200: an idle one makes room", code)
	}
	// The client whose idle connection was closed connects again.
	if code := post(a); code != http.StatusOK && code != http.StatusServiceUnavailable {
		t.Fatalf("after its idle connection was closed: %d", code)
	}
}
