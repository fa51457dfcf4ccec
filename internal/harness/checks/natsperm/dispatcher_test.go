package natsperm

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/dispatcher"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

// hook is an HTTP destination's receiver: it counts what it is sent and
// answers each delivery of an id with answer(n), n from 1.
type hook struct {
	*httptest.Server
	mu   sync.Mutex
	byID map[string]int
}

func newHook(t *testing.T, answer func(n int) int) *hook {
	t.Helper()
	h := &hook{byID: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("webhook-id")
		h.mu.Lock()
		h.byID[id]++
		n := h.byID[id]
		h.mu.Unlock()
		w.WriteHeader(answer(n))
	}))
	t.Cleanup(h.Close)
	return h
}

// attempts is the number of requests the hook has had.
func (h *hook) attempts() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.byID {
		n += c
	}
	return n
}

// gauge is a dispatcher gauge's value for a destination (-1: no series).
func gauge(t *testing.T, reg *prometheus.Registry, name, destination string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "destination" && l.GetValue() == destination {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// TestDispatcherWithItsOwnUser: the dispatcher runs as the shipped
// "dispatcher" user beside a processor and ingress with theirs, and does
// its whole job without a refusal: it deletes the durable of a destination
// no longer configured, creates its durables with one filter (pinned in
// the request subject) and with several, pulls, and acks (delivered),
// naks with a delay (retry) and terminates (failed); its backlog look
// reads a durable's info and gets the oldest message waiting out a retry.
func TestDispatcherWithItsOwnUser(t *testing.T) {
	srv := startServer(t)
	url := srv.ClientURL()
	migrateStreams(t, url)
	db := testrig.Database(t)

	// A durable of a destination since removed from the config, made by a
	// dispatcher of an earlier config (the same user).
	nc, err := stream.Connect(roleConfig(t, url, "dispatcher", "").NATS, "dispatcher", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	djs, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	gone := config.Destination{Name: "gone", URL: "http://127.0.0.1:9/"}
	if _, err := djs.CreateOrUpdateConsumer(ctx, envelope.StreamOut, dispatcher.ConsumerConfig(gone)); err != nil {
		t.Fatalf("the dispatcher's user cannot create a destination's durable: %v", err)
	}

	accepting := newHook(t, func(int) int { return http.StatusNoContent })
	// 503 first: a retry (nak with a delay), held in the durable as its
	// backlog; then 204.
	retrying := newHook(t, func(n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	refusing := newHook(t, func(int) int { return http.StatusBadRequest }) // failed at once: terminated
	dests := []config.Destination{
		{Name: "one", URL: accepting.URL, Secrets: []string{secret},
			Match: config.DestinationMatch{Tenants: []string{"acme"}, Integrations: []string{"demo"}}},
		{Name: "many", URL: retrying.URL, Secrets: []string{secret}, Retry: []time.Duration{20 * time.Second},
			Match: config.DestinationMatch{Tenants: []string{"acme", "beta"}}},
		{Name: "refused", URL: refusing.URL, Secrets: []string{secret}},
	}
	if f := dispatcher.ConsumerConfig(dests[1]).FilterSubjects; len(f) != 3 {
		t.Fatalf("destination many has filters %v, want three: two tenants and its redeliveries (the request subject without a filter)", f)
	}

	var logs testenv.Buffer
	start := func(user string, roles intake.Roles, dests []config.Destination) *testrig.App {
		cfg := roleConfig(t, url, user, db)
		cfg.Destinations = dests
		return testrig.StartApp(t, cfg, intake.Options{Roles: roles, Log: logger(&logs).With("user", user)})
	}
	proc := start("processor", intake.Roles{Processor: true}, nil)
	disp := start("dispatcher", intake.Roles{Dispatcher: true}, dests)
	ing := start("ingress", intake.Roles{Ingress: true}, nil)
	rp := start("replayer", intake.Roles{Replayer: true}, dests)

	// New messages only, from each durable's creation: wait for them.
	testenv.Eventually(t, 30*time.Second, func() bool {
		c := consumersOf(t, srv)
		for _, d := range dests {
			if _, ok := c[envelope.StreamOut+"/"+d.Durable()]; !ok {
				return false
			}
		}
		_, stale := c[envelope.StreamOut+"/"+gone.Durable()]
		return !stale
	}, "the dispatcher never made its durables and removed %s:\n%s", gone.Durable(), &logs)
	c := consumersOf(t, srv)
	if got := c[envelope.StreamOut+"/dispatch-one"]; !slices.Equal(got.FilterSubjects, []string{"intake.out.acme.demo.>", "intake.dispatch.one"}) {
		t.Errorf("dispatch-one filters on %q, want intake.out.acme.demo.> and its redeliveries", got.FilterSubjects)
	}

	sendEvent(t, proc.Config.Integrations[0].Config, ing.URL, &logs)

	testenv.Eventually(t, 30*time.Second, func() bool {
		return accepting.attempts() == 1 && retrying.attempts() == 1 && refusing.attempts() == 1
	}, "the destinations never got the event once each:\n%s", &logs)
	// The backlog look (every 10 s) finds the retry waiting: the durable's
	// info, then the message past its ack floor by subject.
	testenv.Eventually(t, 30*time.Second, func() bool {
		return gauge(t, disp.Metrics.Registry, "intake_dispatcher_backlog", "many") == 1 &&
			gauge(t, disp.Metrics.Registry, "intake_dispatcher_oldest_undelivered_age_seconds", "many") > 0
	}, "the dispatcher never saw the retry in its backlog with its age:\n%s", &logs)
	testenv.Eventually(t, 60*time.Second, func() bool { return retrying.attempts() == 2 },
		"the retry never came:\n%s", &logs)
	// Every durable's messages settled: acked, or terminated.
	testenv.Eventually(t, 30*time.Second, func() bool {
		for _, d := range dests {
			info, err := djs.Consumer(ctx, envelope.StreamOut, d.Durable())
			if err != nil || info.CachedInfo().NumAckPending != 0 || info.CachedInfo().NumPending != 0 {
				return false
			}
		}
		return true
	}, "the durables kept messages pending:\n%s", &logs)
	// The replayer, with its own user, reads each destination's backlog
	// (consumer info on INTAKE_OUT) and redelivers to one destination
	// (publish on intake.dispatch.>).
	api := rp.Client(operatorToken)
	list, err := api.Destinations(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list.Destinations {
		if d.Backlog == nil {
			t.Errorf("destination %s: the replayer could not read its backlog:\n%s", d.Name, &logs)
		}
	}
	since, no := time.Now().Add(-time.Hour), false
	rep, err := api.StartRedelivery(ctx, apiclient.RedeliveryRequest{Destination: "one", DryRun: &no, Reason: "permissions",
		Selector: apiclient.RedeliverySelector{Since: &since}})
	if err != nil {
		t.Fatal(err)
	}
	if done := testrig.WaitReplay(t, api, rep.ID, 30*time.Second); done.Published != 1 {
		t.Fatalf("the redelivery to one destination published %d, want 1:\n%s", done.Published, &logs)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return accepting.attempts() == 2 },
		"the redelivered copy never reached destination one:\n%s", &logs)
	if retrying.attempts() != 2 || refusing.attempts() != 1 {
		t.Errorf("the other destinations got the copy too: %d, %d attempts", retrying.attempts(), refusing.attempts())
	}
	if strings.Contains(logs.String(), permDenied) {
		t.Fatalf("a role was refused a permission:\n%s", logs.String())
	}
}

// TestDispatcherKeepsOffOtherConsumers: the dispatcher's user may create,
// pull from and delete "dispatch-*" durables of INTAKE_OUT — any name but
// those denied — and nothing else: not the replayer's scan slots, not the
// example subscriber's durable (nor forge its acks), no consumer of
// INTAKE_IN; no publish, no stream administration, no INTAKE_IN.
func TestDispatcherKeepsOffOtherConsumers(t *testing.T) {
	srv := startServer(t)
	url := srv.ClientURL()
	migrateStreams(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	connect := func(user, inbox string, logs *testenv.Buffer) (*nats.Conn, jetstream.JetStream) {
		ncfg := roleConfig(t, url, user, "").NATS
		if inbox != "" {
			ncfg.InboxPrefix = inbox
		}
		if logs == nil {
			logs = &testenv.Buffer{}
		}
		nc, err := stream.Connect(ncfg, user, true, logger(logs))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		return nc, js
	}
	// The others' consumers: the processors' durable, the example
	// subscriber's, one of the replayer's scan slots on INTAKE_OUT.
	_, pjs := connect("processor", "", nil)
	if _, err := stream.EnsureProcessorConsumer(ctx, pjs, roleConfig(t, url, "processor", "").Processor); err != nil {
		t.Fatal(err)
	}
	_, sjs := connect("subscriber", "_INBOX", nil)
	subFilters := []string{"intake.out.acme.demo.>", "intake.out.acme.other.>"}
	sub, err := sjs.CreateOrUpdateConsumer(ctx, envelope.StreamOut, jetstream.ConsumerConfig{Durable: "example-subscriber",
		AckPolicy: jetstream.AckExplicitPolicy, FilterSubjects: subFilters})
	if err != nil {
		t.Fatal(err)
	}
	_, rjs := connect("replayer", "", nil)
	slot := replayer.ScanConsumerName(0)
	if _, err := rjs.CreateConsumer(ctx, envelope.StreamOut, jetstream.ConsumerConfig{Name: slot, AckPolicy: jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute, FilterSubjects: subFilters}); err != nil {
		t.Fatal(err)
	}
	// A message for the subscriber, delivered to it and not acked: the
	// dispatcher must not be able to ack it by forging the reply subject.
	_, ojs := connect("processor", "", nil)
	if _, err := ojs.Publish(ctx, "intake.out.acme.demo.test", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	batch, err := sub.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var delivered jetstream.Msg
	for m := range batch.Messages() {
		delivered = m
	}
	if delivered == nil {
		t.Fatal("the subscriber got no message")
	}
	before := consumersOf(t, srv)

	var logs testenv.Buffer
	nc, js := connect("dispatcher", "", &logs)
	attempt := func(f func(ctx context.Context) error) error {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return f(c)
	}
	// refused: the server never answered; an answer, even an error, would
	// mean the request was let through.
	refused := func(err error) bool {
		return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrPermissionViolation)
	}
	pull := func(streamName, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := nc.RequestWithContext(ctx, "$JS.API.CONSUMER.MSG.NEXT."+streamName+"."+name, []byte(`{"batch":1,"no_wait":true}`))
			return err
		}
	}
	// Allowed, as a control: a destination's durable with one filter and
	// with several, pulled from, listed, deleted.
	for _, cc := range []jetstream.ConsumerConfig{
		{Durable: "dispatch-a", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "intake.out.acme.*.>"},
		{Durable: "dispatch-b", AckPolicy: jetstream.AckExplicitPolicy, FilterSubjects: subFilters},
	} {
		if _, err := js.CreateOrUpdateConsumer(ctx, envelope.StreamOut, cc); err != nil {
			t.Fatalf("the dispatcher's user cannot create %s: %v", cc.Durable, err)
		}
		if err := attempt(pull(envelope.StreamOut, cc.Durable)); err != nil {
			t.Errorf("the dispatcher's user cannot pull from %s: %v", cc.Durable, err)
		}
		if _, err := js.Consumer(ctx, envelope.StreamOut, cc.Durable); err != nil {
			t.Errorf("the dispatcher's user cannot read %s's info: %v", cc.Durable, err)
		}
	}
	s, err := js.Stream(ctx, envelope.StreamOut)
	if err != nil {
		t.Fatalf("the dispatcher's user cannot read INTAKE_OUT's info: %v", err)
	}
	var names []string
	lister := s.ConsumerNames(ctx)
	for n := range lister.Name() {
		names = append(names, n)
	}
	if err := lister.Err(); err != nil || !slices.Contains(names, "dispatch-a") {
		t.Errorf("the dispatcher's user cannot list INTAKE_OUT's consumers: %v, %v", names, err)
	}
	if _, err := s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject("intake.out.>")); err != nil {
		t.Errorf("the dispatcher's user cannot get a message of INTAKE_OUT by subject: %v", err)
	}
	for _, name := range []string{"dispatch-a", "dispatch-b"} {
		if err := js.DeleteConsumer(ctx, envelope.StreamOut, name); err != nil {
			t.Errorf("the dispatcher's user cannot delete %s: %v", name, err)
		}
	}

	// Refused: the others' consumers, by create or update, pull, delete.
	for _, d := range []struct{ stream, name string }{
		{envelope.StreamOut, "example-subscriber"},
		{envelope.StreamOut, slot},
		{envelope.StreamOut, replayer.ScanConsumerName(replayer.ScanSlots - 1)},
		{envelope.StreamIn, envelope.ConsumerName},
	} {
		if err := attempt(func(ctx context.Context) error { return js.DeleteConsumer(ctx, d.stream, d.name) }); !refused(err) {
			t.Errorf("the dispatcher's user may delete %s/%s: %v", d.stream, d.name, err)
		}
		for _, f := range [][]string{{"intake.out.acme.demo.>"}, subFilters} {
			cc := jetstream.ConsumerConfig{Durable: d.name, AckPolicy: jetstream.AckExplicitPolicy, FilterSubjects: f}
			if len(f) == 1 {
				cc.FilterSubject, cc.FilterSubjects = f[0], nil
			}
			if d.stream == envelope.StreamIn {
				cc.FilterSubject, cc.FilterSubjects = envelope.SubjectInAll, nil
			}
			if err := attempt(func(ctx context.Context) error {
				_, err := js.CreateOrUpdateConsumer(ctx, d.stream, cc)
				return err
			}); !refused(err) {
				t.Errorf("the dispatcher's user may create or update %s/%s (filters %v): %v", d.stream, d.name, f, err)
			}
		}
		if err := attempt(pull(d.stream, d.name)); !refused(err) {
			t.Errorf("the dispatcher's user may pull from %s/%s: %v", d.stream, d.name, err)
		}
	}
	for what, f := range map[string]func(context.Context) error{
		"read INTAKE_IN's info": func(ctx context.Context) error { _, err := js.Stream(ctx, envelope.StreamIn); return err },
		"publish a processed event": func(ctx context.Context) error {
			_, err := js.Publish(ctx, "intake.out.acme.demo.test", []byte("{}"))
			return err
		},
		"publish a delivery": func(ctx context.Context) error {
			_, err := js.Publish(ctx, "intake.in.demo.test", []byte("{}"))
			return err
		},
		"create a stream": func(ctx context.Context) error {
			_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVIL", Subjects: []string{"evil.>"}})
			return err
		},
		"delete a stream": func(ctx context.Context) error { return js.DeleteStream(ctx, envelope.StreamOut) },
		"purge a stream":  func(ctx context.Context) error { return s.Purge(ctx) },
	} {
		if err := attempt(f); !refused(err) {
			t.Errorf("the dispatcher's user may %s: %v", what, err)
		}
	}
	// A forged ack of the subscriber's message: a plain publish, dropped
	// by the server and reported on the side.
	if err := nc.Publish(delivered.Reply(), []byte("+ACK")); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	testenv.Eventually(t, 5*time.Second, func() bool {
		return strings.Contains(logs.String(), permDenied) && strings.Contains(logs.String(), delivered.Reply())
	}, "the forged ack was not refused:\n%s", &logs)

	after := consumersOf(t, srv)
	if len(after) != len(before) {
		t.Errorf("consumers after the dispatcher's attempts: %d, want %d", len(after), len(before))
	}
	for k, b := range before {
		a, ok := after[k]
		if !ok || a.AckPolicy != b.AckPolicy || a.FilterSubject != b.FilterSubject || !slices.Equal(a.FilterSubjects, b.FilterSubjects) {
			t.Errorf("consumer %s after the dispatcher's attempts: %+v, want %+v", k, a, b)
		}
	}
	if n := ackPending(t, srv, envelope.StreamOut, "example-subscriber"); n != 1 {
		t.Errorf("the subscriber's message: %d ack-pending after the forged ack, want 1 (unacked)", n)
	}
	if got := streamMsgs(t, srv, envelope.StreamIn); got != 0 {
		t.Errorf("INTAKE_IN holds %d messages published by the dispatcher's user", got)
	}
}

// ackPending is a consumer's number of messages delivered and not acked,
// as the server has it (no client permission involved).
func ackPending(t *testing.T, srv *server.Server, streamName, name string) int {
	t.Helper()
	d, err := srv.JszAccount(&server.JSzOptions{Account: "INTAKE", Streams: true, Consumer: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range d.Streams {
		for _, c := range s.Consumer {
			if s.Name == streamName && c.Name == name {
				return c.NumAckPending
			}
		}
	}
	t.Fatalf("no consumer %s/%s", streamName, name)
	return 0
}

// TestDispatcherWithoutItsPermissionStops: a dispatcher whose NATS user
// may not create its destination's consumer stops with an error naming the
// refused request, instead of retrying an unanswered request for ever.
func TestDispatcherWithoutItsPermissionStops(t *testing.T) {
	srv := startServer(t)
	url := srv.ClientURL()
	migrateStreams(t, url)
	db := testrig.Database(t)
	st, err := store.Open(context.Background(), db, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logs testenv.Buffer
	js := subscriberJS(t, url, &logs)
	d, err := dispatcher.New(dispatcher.Options{Store: st, JS: js, Log: logger(&logs), Destinations: []config.Destination{{
		Name: "hooks", URL: "http://127.0.0.1:1/hooks", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = d.Run(ctx)
	subject := "$JS.API.CONSUMER.CREATE." + envelope.StreamOut
	if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), subject) || ctx.Err() != nil {
		t.Fatalf("Run = %v (context: %v), want the permissions violation on %s before the deadline\n%s", err, ctx.Err(), subject, logs.String())
	}
}
