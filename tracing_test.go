package intake_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/subscriber"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/pkg/telemetry/otlp"
	"github.com/intakehq/intake/replayer/apiclient"
)

// span is one span the OTLP receiver got, ids in hex.
type span struct {
	Service, Name           string
	TraceID, SpanID, Parent string
	Attrs                   map[string]string
	Links                   []spanLink
}

type spanLink struct{ TraceID, SpanID, Kind string }

// otlpReceiver is an OTLP/HTTP traces endpoint (POST /v1/traces,
// protobuf), as a collector would serve it.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.export))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) export(w http.ResponseWriter, req *http.Request) {
	// No kept-alive connection: the exporters' idle connections would
	// outlive the test (goleak).
	w.Header().Set("Connection", "close")
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces application/x-protobuf", http.StatusBadRequest)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []span
	for _, rs := range msg.GetResourceSpans() {
		service := attrMap(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := span{Service: service, Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), Parent: hex.EncodeToString(s.GetParentSpanId()),
					Attrs: attrMap(s.GetAttributes())}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, spanLink{TraceID: hex.EncodeToString(l.GetTraceId()),
						SpanID: hex.EncodeToString(l.GetSpanId()), Kind: attrMap(l.GetAttributes())["intake.link"]})
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetBoolValue())
		default:
			m[kv.GetKey()] = v.GetStringValue()
		}
	}
	return m
}

func (r *otlpReceiver) all() []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// tracing is a role's tracer provider exporting to the receiver, shut down
// (flushed) when the test ends, before the receiver closes.
func (r *otlpReceiver) tracing(t *testing.T, role string) *otlp.Tracing {
	t.Helper()
	tr, err := otlp.New(context.Background(), otlp.Options{Role: role, Version: "test",
		EndpointURL: r.srv.URL + "/v1/traces", LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil || !tr.Enabled() {
		t.Fatalf("tracing for %s: %v (enabled %v)", role, err, tr.Enabled())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			t.Errorf("tracing %s: shutdown: %v", role, err)
		}
	})
	return tr
}

// waitSpans flushes every provider until find finds what it looks for.
func (r *otlpReceiver) waitSpans(t *testing.T, trs []*otlp.Tracing, what string, find func([]span) bool) []span {
	t.Helper()
	var got []span
	testenv.Eventually(t, 30*time.Second, func() bool {
		for _, tr := range trs {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = tr.ForceFlush(ctx)
			cancel()
		}
		got = r.all()
		return find(got)
	}, "the receiver never got %s", what)
	return got
}

// tracedPipeline is the product as separate roles would run it: an
// ingress app, a processor app, a replayer (API) app and a subscriber, each
// with its own NATS connection and its own tracer provider exporting to one
// receiver.
type tracedPipeline struct {
	*pipeline
	recv    *otlpReceiver
	apiBase string // the replayer app's
	trs     []*otlp.Tracing
	handled chan trace.SpanContext // the span context each subscriber call ran in
}

func startTracedPipeline(t *testing.T) *tracedPipeline {
	t.Helper()
	recv := newOTLPReceiver(t)
	trIn, trProc, trRep, trSub := recv.tracing(t, "ingress"), recv.tracing(t, "processor"), recv.tracing(t, "replayer"),
		recv.tracing(t, "subscriber")
	tr := testrig.New(t, testrig.Options{Config: testConfig})
	in := testrig.StartApp(t, tr.Config, intake.Options{Roles: intake.Roles{Ingress: true}, TracerProvider: trIn.Provider()})
	testrig.StartApp(t, tr.Config, intake.Options{Roles: intake.Roles{Processor: true}, TracerProvider: trProc.Provider()})
	rep := testrig.StartApp(t, tr.Config, intake.Options{Roles: intake.Roles{Replayer: true}, TracerProvider: trRep.Provider()})
	p := &tracedPipeline{
		pipeline: &pipeline{t: t, tr: tr, cfg: tr.Config, base: in.URL, nats: tr.Server, js: tr.JS, db: tr.DB},
		recv:     recv, apiBase: rep.URL, trs: []*otlp.Tracing{trIn, trProc, trRep, trSub}, handled: make(chan trace.SpanContext, 16),
	}

	_, js := testrig.Connect(t, tr.Server.URL())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- subscriber.Consume(ctx, js, subscriber.Options{Durable: "traced", TracerProvider: trSub.Provider()},
			func(ctx context.Context, _ subscriber.Message) error {
				p.handled <- trace.SpanContextFromContext(ctx)
				return nil
			})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("subscriber: %v", err)
		}
	})
	return p
}

func TestOneWebhookIsOneTraceAcrossTheRoles(t *testing.T) {
	t.Parallel()
	p := startTracedPipeline(t)
	d := p.sign("demo", "evt_traced", demoBody("evt_traced", "hello"), time.Now())
	if code, a, _ := p.post(d); code != http.StatusOK || a.Status != "accepted" {
		t.Fatalf("post = %d %+v, want 200 accepted", code, a)
	}
	var handled trace.SpanContext
	select {
	case handled = <-p.handled:
	case <-time.After(30 * time.Second):
		t.Fatal("the subscriber never got the event")
	}

	// Spans end, and are exported, in their own time: the publish span at
	// its PubAck, perhaps after the subscriber's.
	spans := p.recv.waitSpans(t, p.trs, "seven spans in the event's trace", func(s []span) bool {
		return len(spansOf(s, handled.TraceID().String())) >= 7 && findSpan(s, "intake.processor.batch", "") != nil
	})
	req := findSpan(spans, "intake.ingress.request", "")
	if req == nil {
		t.Fatalf("no ingress request span among %d spans", len(spans))
	}
	tree := render(spans, req.TraceID)
	t.Logf("trace %s:\n%s", req.TraceID, tree)
	if !handled.IsSampled() || handled.TraceID().String() != req.TraceID {
		t.Fatalf("the subscriber's handler ran in trace %s (sampled %v), want %s", handled.TraceID(), handled.IsSampled(), req.TraceID)
	}

	// One chain, parent to child, across three tracer providers and three
	// NATS connections.
	chain := []struct{ name, service, parent string }{
		{"intake.ingress.request", "intake-ingress", ""},
		{"intake.ingress.verify", "intake-ingress", "intake.ingress.request"},
		{"intake.ingress.publish", "intake-ingress", "intake.ingress.request"},
		{"intake.processor.event", "intake-processor", "intake.ingress.publish"},
		{"intake.handle", "intake-processor", "intake.processor.event"},
		{"intake.outbox.publish", "intake-processor", "intake.processor.event"},
		{"intake.subscriber.handle", "intake-subscriber", "intake.outbox.publish"},
	}
	byName := map[string]*span{}
	for _, c := range chain {
		s := findSpan(spans, c.name, req.TraceID)
		if s == nil {
			t.Fatalf("trace %s has no %s span:\n%s", req.TraceID, c.name, tree)
		}
		if s.Service != c.service {
			t.Errorf("%s comes from %s, want %s", c.name, s.Service, c.service)
		}
		byName[c.name] = s
		if c.parent == "" {
			if s.Parent != "" {
				t.Errorf("%s has a parent (%s); want a root", c.name, s.Parent)
			}
			continue
		}
		if s.Parent != byName[c.parent].SpanID {
			t.Errorf("%s's parent is %s, want %s (%s)", c.name, s.Parent, c.parent, byName[c.parent].SpanID)
		}
	}
	if n := len(spansOf(spans, req.TraceID)); n != len(chain) {
		t.Errorf("trace %s has %d spans, want %d:\n%s", req.TraceID, n, len(chain), tree)
	}
	// The batch is its own trace, linked to the events it carried.
	batch := findSpan(spans, "intake.processor.batch", "")
	if batch.TraceID == req.TraceID || !slices.Contains(batch.Links, spanLink{TraceID: req.TraceID, SpanID: byName["intake.ingress.publish"].SpanID}) {
		t.Errorf("batch span %+v: want a trace of its own linked to the ingress publish span", batch)
	}
	ev := byName["intake.processor.event"]
	if ev.Attrs["intake.outcome"] != "new" || ev.Attrs["intake.key_hash"] != telemetry.KeyHash(envelope.Key{Integration: "demo", Account: "main", EventID: "evt_traced"}) ||
		ev.Attrs["intake.integration"] != "demo" || ev.Attrs["intake.tenant"] != "acme" {
		t.Errorf("processor event span attributes %v", ev.Attrs)
	}
	if r := byName["intake.ingress.request"]; r.Attrs["intake.outcome"] != "accepted" || r.Attrs["http.response.status_code"] != "200" {
		t.Errorf("ingress request span attributes %v", r.Attrs)
	}
	// Nothing of the payload or the signature in any attribute.
	for _, s := range spansOf(spans, req.TraceID) {
		for k, v := range s.Attrs {
			if strings.Contains(v, "hello") || strings.Contains(v, "evt_traced") || strings.Contains(v, "whsec") {
				t.Errorf("span %s attribute %s = %q leaks the event", s.Name, k, v)
			}
		}
	}

	// The messages carry traceparent; their ids and hashes do not depend on it.
	in := testrig.Messages(t, p.js, envelope.StreamIn)[0]
	if tp := in.Header.Get(envelope.HeaderTraceparent); !strings.Contains(tp, req.TraceID) {
		t.Errorf("INTAKE_IN traceparent %q, want trace %s", tp, req.TraceID)
	}
	if id := in.Header.Get(envelope.HeaderMsgID); id != envelope.DeliveryMsgID(envelope.Key{Integration: "demo", Account: "main", EventID: "evt_traced"}, envelope.PayloadSHA256(d.body)) {
		t.Errorf("Nats-Msg-Id %q depends on more than the key and the payload", id)
	}
}

// Issue 30 item 10: whoever may publish to intake.in.> writes the
// message's traceparent. With the default sampler (parentbased_always_on)
// a forged message whose traceparent says "not sampled" (flags 00) left no
// processor span: the publisher hid it from Intake's traces. Now the
// processor's sampler re-decides a remote parent (otlp.Sampler): the event
// span is there, in the trace the message named.
func TestAPublishersTraceparentDecidesNoSampling(t *testing.T) {
	t.Parallel()
	p := startTracedPipeline(t)
	k := envelope.Key{Integration: "demo", Account: "main", EventID: "evt_forged_unsampled"}
	msg := envelope.NewDelivery(k, "acme", "invoice.paid", demoBody(k.EventID, "hi"), time.Now()).Msg()
	const traceID = "5f0c1a2b3c4d5e6f708192a3b4c5d6e7"
	msg.Header.Set(envelope.HeaderTraceparent, "00-"+traceID+"-0102030405060708-00")
	if _, err := p.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	spans := p.recv.waitSpans(t, p.trs, "the processor's span of the forged message", func(s []span) bool {
		return findSpan(s, "intake.processor.event", traceID) != nil
	})
	ev := findSpan(spans, "intake.processor.event", traceID)
	if ev.Parent != "0102030405060708" || ev.Attrs["intake.key_hash"] != telemetry.KeyHash(k) {
		t.Errorf("event span %+v: want the message's trace and parent, and its key's hash", ev)
	}
}

func TestAReplayLinksToTheOriginalTrace(t *testing.T) {
	t.Parallel()
	p := startTracedPipeline(t)
	d := p.sign("demo", "evt_replayed", demoBody("evt_replayed", "hello"), time.Now())
	if code, a, _ := p.post(d); code != http.StatusOK || a.Status != "accepted" {
		t.Fatalf("post = %d %+v, want 200 accepted", code, a)
	}
	select {
	case <-p.handled:
	case <-time.After(30 * time.Second):
		t.Fatal("the subscriber never got the event")
	}
	p.settled(1)
	orig := findSpan(p.recv.waitSpans(t, p.trs, "the ingress span", func(s []span) bool {
		return findSpan(s, "intake.ingress.publish", "") != nil
	}), "intake.ingress.publish", "")

	no := false
	c := apiclient.New(p.apiBase, operatorToken, nil)
	rep, err := c.StartReplay(context.Background(), apiclient.ReplayRequest{Selector: apiclient.Selector{Keys: []string{"demo/main/evt_replayed"}},
		Mode: inbox.ReplayReexecute, DryRun: &no, Reason: "tracing test"})
	if err != nil {
		t.Fatal(err)
	}
	testrig.WaitReplay(t, c, rep.ID, 30*time.Second)
	var again trace.SpanContext
	select {
	case again = <-p.handled:
	case <-time.After(30 * time.Second):
		t.Fatal("the subscriber never got the re-execution")
	}

	spans := p.recv.waitSpans(t, p.trs, "the replay's spans", func(s []span) bool {
		return findSpan(s, "intake.replayer.republish", again.TraceID().String()) != nil && len(spansOf(s, again.TraceID().String())) >= 5
	})
	rp := findSpan(spans, "intake.replayer.republish", "")
	t.Logf("replay trace %s:\n%s", rp.TraceID, render(spans, rp.TraceID))
	if rp.TraceID == orig.TraceID || rp.Parent != "" || rp.Service != "intake-replayer" {
		t.Fatalf("republish span %+v: want the root of a trace of its own", rp)
	}
	if !slices.Contains(rp.Links, spanLink{TraceID: orig.TraceID, SpanID: orig.SpanID, Kind: "original"}) {
		t.Fatalf("republish span links %+v, want the original's ingress publish span %s/%s", rp.Links, orig.TraceID, orig.SpanID)
	}
	if rp.Attrs["intake.replay_id"] != rep.ID || rp.Attrs["intake.replay_mode"] != string(inbox.ReplayReexecute) {
		t.Errorf("republish span attributes %v", rp.Attrs)
	}
	ev := findSpan(spans, "intake.processor.event", rp.TraceID)
	if ev == nil || ev.Parent != rp.SpanID || ev.Attrs["intake.replay_id"] != rep.ID {
		t.Fatalf("the processor's span of the copy %+v: want a child of the republish span", ev)
	}
	pub := findSpan(spans, "intake.outbox.publish", rp.TraceID)
	if sub := findSpan(spans, "intake.subscriber.handle", rp.TraceID); pub == nil || pub.Parent != ev.SpanID || sub.Parent != pub.SpanID {
		t.Errorf("replay trace: want republish → event → outbox publish → subscriber:\n%s", render(spans, rp.TraceID))
	}
	if again.TraceID().String() != rp.TraceID {
		t.Errorf("the subscriber handled the re-execution in trace %s, want the replay's %s", again.TraceID(), rp.TraceID)
	}
	// The original's trace is untouched by the replay.
	if n := len(spansOf(spans, orig.TraceID)); n != 7 {
		t.Errorf("the original trace has %d spans after the replay, want 7:\n%s", n, render(spans, orig.TraceID))
	}
}

func findSpan(spans []span, name, traceID string) *span {
	for i := range spans {
		if spans[i].Name == name && (traceID == "" || spans[i].TraceID == traceID) {
			return &spans[i]
		}
	}
	return nil
}

func spansOf(spans []span, traceID string) []span {
	var out []span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// render prints a trace as an indented tree: name [service] attributes,
// links.
func render(spans []span, traceID string) string {
	mine := spansOf(spans, traceID)
	children := map[string][]span{}
	ids := map[string]bool{}
	for _, s := range mine {
		ids[s.SpanID] = true
	}
	var roots []span
	for _, s := range mine {
		if s.Parent == "" || !ids[s.Parent] {
			roots = append(roots, s)
			continue
		}
		children[s.Parent] = append(children[s.Parent], s)
	}
	var b strings.Builder
	var walk func(s span, depth int)
	walk = func(s span, depth int) {
		keys := make([]string, 0, len(s.Attrs))
		for k := range s.Attrs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var attrs []string
		for _, k := range keys {
			attrs = append(attrs, k+"="+s.Attrs[k])
		}
		fmt.Fprintf(&b, "%s%s [%s] %s\n", strings.Repeat("  ", depth), s.Name, s.Service, strings.Join(attrs, " "))
		if s.Parent != "" && !ids[s.Parent] {
			fmt.Fprintf(&b, "%s  (parent %s, remote)\n", strings.Repeat("  ", depth), s.Parent)
		}
		for _, l := range s.Links {
			fmt.Fprintf(&b, "%s  link %s -> trace %s span %s\n", strings.Repeat("  ", depth), l.Kind, l.TraceID, l.SpanID)
		}
		kids := children[s.SpanID]
		sort.Slice(kids, func(i, j int) bool { return kids[i].Name < kids[j].Name })
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}
