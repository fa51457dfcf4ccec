package intake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/ingress"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/replayer/apiclient"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	demoSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	partnerSecret = "partner-test-secret"
	viewerToken   = "viewer-token-0123456789"
	operatorToken = "operator-token-0123456789"
)

const testConfig = `
nats: {publish_timeout: 2s}
processor: {ack_wait: 2s, concurrency: 2}
outbox: {poll_interval: 200ms}
api:
  tokens:
    - {name: viewer, token: ` + viewerToken + `, role: viewer}
    - {name: ops, token: ` + operatorToken + `, role: operator}
integrations:
  - name: demo
    provider: standard
    tenant: acme
    account: main
    secrets: ["whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "` + demoSecret + `"]
    max_body_bytes: 4096
  - name: partner
    provider: hmac
    tenant: globex
    secrets: ["` + partnerSecret + `"]
    hmac: {header: X-Signature, prefix: "sha256="}
    event_id: {field: id}
    event_type: {field: type}
`

// pipeline is the whole product in one process — ingress, processor, relay
// and API as `intake dev` wires them — against an embedded nats-server and a
// fresh Postgres database: the shared testrig with this package's helpers.
type pipeline struct {
	t    *testing.T
	tr   *testrig.Rig
	cfg  *config.Config
	base string
	nats *testenv.NATSServer
	js   jetstream.JetStream
	db   *pgxpool.Pool
}

func startPipeline(t *testing.T, mutate func(*config.Config)) *pipeline {
	t.Helper()
	tr := testrig.New(t, testrig.Options{Config: testConfig, Mutate: mutate,
		App: &intake.Options{Roles: intake.Roles{Ingress: true, Processor: true, Replayer: true}}})
	return &pipeline{t: t, tr: tr, cfg: tr.Config, base: tr.App.URL, nats: tr.Server, js: tr.JS, db: tr.DB}
}

// delivery is one signed request as a provider would send it.
type delivery struct {
	integration string
	id          string
	body        []byte
	header      http.Header
}

func (p *pipeline) sign(integration, id string, body []byte, at time.Time) delivery {
	p.t.Helper()
	in, ok := p.cfg.Integration(integration)
	if !ok {
		p.t.Fatalf("no integration %s", integration)
	}
	h, err := provider.Sign(in.Config, len(in.Secrets)-1, id, body, at)
	if err != nil {
		p.t.Fatal(err)
	}
	return delivery{integration: integration, id: id, body: body, header: h}
}

func demoBody(id, msg string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"type":"invoice.paid","data":{"msg":%q}}`, id, msg))
}

func (p *pipeline) post(d delivery) (int, ingress.Answer, http.Header) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.base+"/webhooks/"+d.integration, bytes.NewReader(d.body))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header = d.header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var a ingress.Answer
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &a); err != nil {
		p.t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, raw)
	}
	return resp.StatusCode, a, resp.Header
}

func (p *pipeline) getEvent(token, integration, id string) (int, apiclient.Event) {
	p.t.Helper()
	d, err := apiclient.New(p.base, token, nil).Event(context.Background(), integration, id)
	if code := apiclient.StatusCode(err); code != 0 {
		return code, apiclient.Event{}
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return http.StatusOK, d.Event
}

// settled waits until the inbox holds want rows and the outbox has nothing
// left to publish: from then on the INTAKE_OUT count is final.
func (p *pipeline) settled(want int) {
	p.t.Helper()
	p.tr.Settled(p.t, want, 30*time.Second)
}

// outMessages reads every message on INTAKE_OUT, grouped by Intake-Key.
func (p *pipeline) outMessages() map[string][]*jetstream.RawStreamMsg {
	p.t.Helper()
	return streamMessages(p.t, p.js, envelope.StreamOut)
}

func streamMessages(t *testing.T, js jetstream.JetStream, name string) map[string][]*jetstream.RawStreamMsg {
	t.Helper()
	out := map[string][]*jetstream.RawStreamMsg{}
	for _, raw := range testrig.Messages(t, js, name) {
		k := raw.Header.Get(envelope.HeaderKey)
		out[k] = append(out[k], raw)
	}
	return out
}

func streamCount(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestOneDeliveryIsProcessedOnce(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, nil)
	d := p.sign("demo", "evt_one", demoBody("evt_one", "hello"), time.Now())

	code, a, _ := p.post(d)
	if code != http.StatusOK || a.Status != "accepted" || a.Key != "demo/main/evt_one" {
		t.Fatalf("post = %d %+v, want 200 accepted demo/main/evt_one", code, a)
	}
	p.settled(1)

	code, ev := p.getEvent(viewerToken, "demo", "evt_one")
	if code != http.StatusOK {
		t.Fatalf("GET event = %d", code)
	}
	if ev.Status != inbox.StatusProcessed || ev.DeliveryCount != 1 || ev.Tenant != "acme" ||
		ev.EventType != "invoice.paid" || ev.PayloadSHA256 != envelope.PayloadSHA256(d.body) || ev.StreamSeq != 1 {
		t.Fatalf("event = %+v", ev)
	}
	out := p.outMessages()
	msgs := out["demo/main/evt_one"]
	if len(out) != 1 || len(msgs) != 1 {
		t.Fatalf("INTAKE_OUT holds %d keys, %d messages for the event; want exactly one", len(out), len(msgs))
	}
	m := msgs[0]
	if m.Subject != "intake.out.acme.demo.invoice%2Epaid" || !bytes.Equal(m.Data, d.body) {
		t.Fatalf("processed message subject %q body %q", m.Subject, m.Data)
	}
	for h, want := range map[string]string{
		envelope.HeaderTenant: "acme", envelope.HeaderIntegration: "demo", envelope.HeaderEventID: "evt_one",
		envelope.HeaderEventType: "invoice.paid",
	} {
		if got := m.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
}

func TestSameDeliveryConcurrently(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, nil)
	d := p.sign("demo", "evt_twice", demoBody("evt_twice", "same"), time.Now())

	const n = 8
	var wg sync.WaitGroup
	statuses := make([]envelope.Answer, n)
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() {
			code, a, _ := p.post(d)
			codes[i], statuses[i] = code, a.Status
		})
	}
	wg.Wait()
	accepted := 0
	for i := range n {
		if codes[i] != http.StatusOK {
			t.Fatalf("delivery %d answered %d", i, codes[i])
		}
		if statuses[i] == "accepted" {
			accepted++
		} else if statuses[i] != "duplicate" {
			t.Fatalf("delivery %d status %q", i, statuses[i])
		}
	}
	if accepted != 1 {
		t.Fatalf("%d deliveries accepted, want 1 (the rest duplicate): %v", accepted, statuses)
	}
	p.settled(1)
	if got := streamCount(t, p.js, envelope.StreamIn); got != 1 {
		t.Fatalf("INTAKE_IN holds %d messages, want 1", got)
	}
	// Every answered delivery is in the history, also the ones the stream stopped.
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, ev := p.getEvent(viewerToken, "demo", "evt_twice")
		return ev.DeliveryCount == n
	}, "delivery_count never reached %d", n)
	answers := map[string]int{}
	rows, err := p.db.Query(context.Background(), `SELECT answer, count(*) FROM intake.deliveries GROUP BY answer`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a string
		var c int
		if err := rows.Scan(&a, &c); err != nil {
			t.Fatal(err)
		}
		answers[a] = c
	}
	if answers["accepted"] != 1 || answers["duplicate"] != n-1 {
		t.Fatalf("delivery history answers = %v, want 1 accepted and %d duplicate", answers, n-1)
	}
	if out := p.outMessages(); len(out["demo/main/evt_twice"]) != 1 || len(out) != 1 {
		t.Fatalf("INTAKE_OUT: %d messages for the event, want 1", len(out["demo/main/evt_twice"]))
	}
}

func TestSameIDDifferentPayloadIsAConflict(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, nil)
	first := p.sign("demo", "evt_c", demoBody("evt_c", "original"), time.Now())
	second := p.sign("demo", "evt_c", demoBody("evt_c", "tampered"), time.Now())

	if code, a, _ := p.post(first); code != 200 || a.Status != "accepted" {
		t.Fatalf("first = %d %+v", code, a)
	}
	p.settled(1)
	// The stream must not swallow it: the message id carries the payload hash.
	if code, a, _ := p.post(second); code != 200 || a.Status != "accepted" {
		t.Fatalf("second = %d %+v", code, a)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, ev := p.getEvent(viewerToken, "demo", "evt_c")
		return ev.Conflicts == 1
	}, "conflict never recorded")

	_, ev := p.getEvent(viewerToken, "demo", "evt_c")
	if ev.PayloadSHA256 != envelope.PayloadSHA256(first.body) || ev.Status != inbox.StatusProcessed || ev.DeliveryCount != 1 {
		t.Fatalf("original row changed: %+v", ev)
	}
	var origSHA, conflSHA string
	var origSeq, conflSeq int64
	err := p.db.QueryRow(context.Background(), `SELECT original_sha256, conflicting_sha256, original_stream_seq,
		conflicting_stream_seq FROM intake.conflicts`).Scan(&origSHA, &conflSHA, &origSeq, &conflSeq)
	if err != nil {
		t.Fatal(err)
	}
	if origSHA != envelope.PayloadSHA256(first.body) || conflSHA != envelope.PayloadSHA256(second.body) || origSeq != 1 || conflSeq != 2 {
		t.Fatalf("conflict row %s %s %d %d", origSHA, conflSHA, origSeq, conflSeq)
	}
	p.settled(1)
	if out := p.outMessages(); len(out["demo/main/evt_c"]) != 1 {
		t.Fatalf("INTAKE_OUT: %d messages for the event, want 1 (the conflict applies nothing)", len(out["demo/main/evt_c"]))
	}
}

func TestRejectionsPublishNothing(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, nil)
	good := func() delivery { return p.sign("demo", "evt_r", demoBody("evt_r", "x"), time.Now()) }

	tests := []struct {
		name   string
		make   func() delivery
		code   int
		reason string
	}{
		{"bad signature", func() delivery {
			d := good()
			d.header.Set("webhook-signature", "v1,"+strings.Repeat("A", 43)+"=")
			return d
		}, 401, "bad_signature"},
		{"tampered body", func() delivery {
			d := good()
			d.body = demoBody("evt_r", "y")
			return d
		}, 401, "bad_signature"},
		{"stale timestamp", func() delivery {
			return p.sign("demo", "evt_r", demoBody("evt_r", "x"), time.Now().Add(-6*time.Minute))
		}, 401, "timestamp"},
		{"future timestamp", func() delivery {
			return p.sign("demo", "evt_r", demoBody("evt_r", "x"), time.Now().Add(6*time.Minute))
		}, 401, "timestamp"},
		{"missing signature header", func() delivery {
			d := good()
			d.header.Del("webhook-signature")
			return d
		}, 401, "missing_header"},
		{"missing id header", func() delivery {
			d := good()
			d.header.Del("webhook-id")
			return d
		}, 401, "missing_header"},
		{"oversized body", func() delivery {
			big := demoBody("evt_r", strings.Repeat("x", 5000))
			return p.sign("demo", "evt_r", big, time.Now())
		}, 413, "too_large"},
		{"unknown integration", func() delivery {
			d := good()
			d.integration = "nope"
			return d
		}, 404, "unknown_integration"},
		{"hmac without id field", func() delivery {
			return p.sign("partner", "", []byte(`{"type":"x"}`), time.Now())
		}, 400, "malformed"},
		{"hmac malformed json", func() delivery {
			return p.sign("partner", "", []byte(`{"id": "x"`), time.Now())
		}, 400, "malformed"},
	}
	for _, tt := range tests {
		code, a, _ := p.post(tt.make())
		if code != tt.code || a.Status != "rejected" || a.Reason != tt.reason {
			t.Errorf("%s: answered %d %+v, want %d rejected %s", tt.name, code, a, tt.code, tt.reason)
		}
	}
	if got := streamCount(t, p.js, envelope.StreamIn); got != 0 {
		t.Fatalf("INTAKE_IN holds %d messages after rejections only, want 0", got)
	}
	// A rejected delivery reserved nothing: the genuine one is accepted.
	if code, a, _ := p.post(good()); code != 200 || a.Status != "accepted" {
		t.Fatalf("genuine delivery after rejections = %d %+v", code, a)
	}

	// The refusals reach the status (and the overview) by status code and
	// reason once ingress's next summary is folded: the unknown
	// integration's only in the metric, the accepted delivery not at all.
	want := map[string]map[string]int64{
		"demo":    {"401 bad_signature": 2, "401 timestamp": 2, "401 missing_header": 2, "413 too_large": 1},
		"partner": {"400 malformed": 2},
	}
	api := apiclient.New(p.base, viewerToken, nil)
	var got map[string]map[string]int64
	var total map[string]int64
	testenv.Eventually(t, 40*time.Second, func() bool {
		s, err := api.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got, total = map[string]map[string]int64{}, map[string]int64{}
		for _, x := range s.Integrations {
			for _, r := range x.Refusals {
				if got[x.Name] == nil {
					got[x.Name] = map[string]int64{}
				}
				got[x.Name][fmt.Sprintf("%d %s", r.StatusCode, r.Reason)] = r.Count
			}
			total[x.Name] = x.Refused
		}
		return reflect.DeepEqual(got, want)
	}, "the status's refusals never matched what ingress refused")
	if total["demo"] != 7 || total["partner"] != 2 {
		t.Errorf("refused totals %v, want demo 7, partner 2", total)
	}
}

func TestHMACProvider(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, nil)
	body := []byte(`{"id":"ord_1","type":"order.created"}`)
	code, a, _ := p.post(p.sign("partner", "ord_1", body, time.Now()))
	if code != 200 || a.Status != "accepted" || a.Key != "partner//ord_1" {
		t.Fatalf("post = %d %+v", code, a)
	}
	p.settled(1)
	out := p.outMessages()
	if msgs := out["partner//ord_1"]; len(msgs) != 1 || msgs[0].Subject != "intake.out.globex.partner.order%2Ecreated" {
		t.Fatalf("INTAKE_OUT = %v", out)
	}
}

func TestNATSDownAnswers503ThenRetrySucceeds(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, nil)
	d := p.sign("demo", "evt_outage", demoBody("evt_outage", "x"), time.Now())

	p.nats.Stop(t)
	code, a, h := p.post(d)
	if code != http.StatusServiceUnavailable || a.Status != "unavailable" || h.Get("Retry-After") == "" {
		t.Fatalf("during outage = %d %+v Retry-After=%q, want 503 with Retry-After", code, a, h.Get("Retry-After"))
	}
	p.nats.Start(t)
	// The provider retries until it gets a 2xx.
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, a, _ := p.post(d)
		return code == http.StatusOK && (a.Status == "accepted" || a.Status == "duplicate")
	}, "retry after the outage never succeeded")
	p.settled(1)
	if out := p.outMessages(); len(out["demo/main/evt_outage"]) != 1 {
		t.Fatalf("INTAKE_OUT: %d messages for the event, want 1", len(out["demo/main/evt_outage"]))
	}
}

func TestDuplicatePastTheStreamWindowIsCaughtByTheInbox(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, func(c *config.Config) {
		c.NATS.Stream.DuplicateWindow = time.Second
		c.Outbox.RelayAfter = 500 * time.Millisecond // at most half the window
	})
	d := p.sign("demo", "evt_late", demoBody("evt_late", "x"), time.Now())
	if code, a, _ := p.post(d); code != 200 || a.Status != "accepted" {
		t.Fatalf("first = %d %+v", code, a)
	}
	p.settled(1)
	// Re-deliver until the stream's window has passed and it accepts again.
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, a, _ := p.post(d)
		return a.Status == "accepted"
	}, "stream never forgot the message id")
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, ev := p.getEvent(viewerToken, "demo", "evt_late")
		return ev.DeliveryCount >= 2
	}, "inbox never counted the late duplicate")
	p.settled(1)
	if out := p.outMessages(); len(out["demo/main/evt_late"]) != 1 {
		t.Fatalf("INTAKE_OUT: %d messages for the event, want 1", len(out["demo/main/evt_late"]))
	}
}

func TestAPIRequiresToken(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, nil)
	if code, _ := p.getEvent("", "demo", "x"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, _ := p.getEvent("wrong-token-0123456789", "demo", "x"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	if code, _ := p.getEvent(viewerToken, "demo", "x"); code != http.StatusNotFound {
		t.Errorf("viewer, unknown event: %d, want 404", code)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(p.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s = %d", path, resp.StatusCode)
		}
	}
}

// TestIngressStartedBeforeNATSListensWaitsForIt: a role whose NATS server
// is not listening yet (a container started beside it) waits for it within
// the start budget instead of exiting at once.
func TestIngressStartedBeforeNATSListensWaitsForIt(t *testing.T) {
	t.Parallel()
	n := testenv.NATS(t)
	cfg := testrig.ParseConfig(t, testConfig)
	cfg.NATS.URL = n.URL()
	if err := stream.Setup(context.Background(), cfg.NATS, nil); err != nil { // as `intake migrate` does
		t.Fatal(err)
	}
	n.Stop(t)
	startsOnceBack(t, cfg, intake.Roles{Ingress: true}, "waiting for nats", func() { n.Start(t) })
}

func TestRoleStartedWhilePostgresIsDownWaitsForIt(t *testing.T) {
	t.Parallel()
	pg := testenv.PrivatePostgres(t)
	testrig.Migrate(t, pg.URL())
	n := testenv.NATS(t)
	cfg := testrig.ParseConfig(t, testConfig)
	cfg.NATS.URL, cfg.Postgres.URL = n.URL(), pg.URL()
	if err := stream.Setup(context.Background(), cfg.NATS, nil); err != nil { // as `intake migrate` does
		t.Fatal(err)
	}
	pg.Stop(t)
	startsOnceBack(t, cfg, intake.Roles{Processor: true, Replayer: true}, "waiting for postgres", func() { pg.Start(t) })
}

// startsOnceBack runs the roles while what they need is down: they log
// waiting (want), start comes back, and they listen instead of giving up.
func startsOnceBack(t *testing.T, cfg *config.Config, roles intake.Roles, want string, start func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan net.Addr, 1)
	done := make(chan error, 1)
	var logs testenv.Buffer
	go func() {
		done <- intake.Run(ctx, cfg, intake.Options{Roles: roles, HTTPAddr: "127.0.0.1:0",
			Listening: func(a net.Addr) { listening <- a }, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("app.Run: %v", err)
		}
	})
	testenv.Eventually(t, 30*time.Second, func() bool {
		return strings.Contains(logs.String(), want)
	}, "the role never logged "+want)
	start() // while app.Run waits
	select {
	case <-listening:
	case err := <-done:
		t.Fatalf("the role gave up while it waited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the role never came up once what it waited for was back")
	}
}
