package natsperm

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// shipped is the configuration under test.
const shipped = "../../../../deploy/nats/intake.conf"

// passwords of the shipped users, given to nats-server through the
// environment as the file expects (INTAKE_NATS_<USER>_PASSWORD).
var passwords = map[string]string{
	"admin":      "admin-test-password",
	"ingress":    "ingress-test-password",
	"processor":  "processor-test-password",
	"replayer":   "replayer-test-password",
	"dispatcher": "dispatcher-test-password",
	"subscriber": "subscriber-test-password",
}

const (
	secret        = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	operatorToken = "operator-token-0123456789"
	permDenied    = "lacks a permission"
)

// roleYAML is every role's config; the NATS identity comes from the
// environment as in production.
const roleYAML = `
nats:
  url: "${URL}"
  user: "${INTAKE_NATS_USER}"
  password: "${INTAKE_NATS_PASSWORD}"
  stream: {replicas: 1, max_age: 24h, duplicate_window: 2m}
  publish_timeout: 2s
postgres: {url: "${DATABASE_URL}"}
processor: {ack_wait: 2s}
outbox: {poll_interval: 200ms}
api:
  tokens:
    - {name: ops, token: ` + operatorToken + `, role: operator}
integrations:
  - name: demo
    provider: standard
    tenant: acme
    account: main
    secrets: ["` + secret + `"]
`

// startServer runs deploy/nats/intake.conf on a free port with its store
// in a temporary directory.
func startServer(t *testing.T) *server.Server {
	t.Helper()
	return startServerWith(t, nil)
}

// startServerWith is startServer with edit applied to the options the
// shipped file gives, before the server starts.
func startServerWith(t *testing.T, edit func(*server.Options)) *server.Server {
	t.Helper()
	for user, pw := range passwords {
		t.Setenv("INTAKE_NATS_"+strings.ToUpper(user)+"_PASSWORD", pw)
	}
	opts, err := server.ProcessConfigFile(shipped)
	if err != nil {
		t.Fatalf("%s: %v", shipped, err)
	}
	if !opts.SyncAlways {
		t.Errorf("%s: jetstream.sync_interval is not always: an acknowledged write can be lost on power loss", shipped)
	}
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.StoreDir = t.TempDir()
	opts.SyncAlways = false // the tests' disk is shared; the setting itself is checked above
	opts.NoLog, opts.NoSigs = true, true
	if edit != nil {
		edit(opts)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

// roleConfig is the config a process of user's role loads.
func roleConfig(t *testing.T, url, user, dbURL string) *config.Config {
	t.Helper()
	env := map[string]string{"URL": url, "INTAKE_NATS_USER": user, "INTAKE_NATS_PASSWORD": passwords[user], "DATABASE_URL": dbURL}
	cfg, err := config.Parse([]byte(roleYAML), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// migrateStreams does what `intake migrate` does after the SQL: create the
// streams as admin.
func migrateStreams(t *testing.T, url string) {
	t.Helper()
	if err := stream.Setup(context.Background(), roleConfig(t, url, "admin", "").NATS, nil); err != nil {
		t.Fatalf("streams as admin: %v", err)
	}
}

// streams are the account's streams as the server sees them (no client
// permission involved).
func streams(t *testing.T, srv *server.Server) map[string]server.StreamDetail {
	t.Helper()
	d, err := srv.JszAccount(&server.JSzOptions{Account: "INTAKE", Streams: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]server.StreamDetail{}
	for _, s := range d.Streams {
		out[s.Name] = s
	}
	return out
}

// streamMsgs is the number of messages in a stream.
func streamMsgs(t *testing.T, srv *server.Server, name string) uint64 {
	t.Helper()
	s, ok := streams(t, srv)[name]
	if !ok {
		t.Fatalf("no stream %s", name)
	}
	return s.State.Msgs
}

func logger(b *testenv.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

func TestAnonymousAndWrongPasswordAreRefused(t *testing.T) {
	srv := startServer(t)
	if nc, err := nats.Connect(srv.ClientURL(), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected")
	}
	if nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("ingress", "not-the-password"), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a wrong password connected")
	}
}

// TestRoleBeforeMigrateRefusesToStart: the roles may not create streams;
// one started before `intake migrate` says which stream and what to run.
func TestRoleBeforeMigrateRefusesToStart(t *testing.T) {
	srv := startServer(t)
	cfg := roleConfig(t, srv.ClientURL(), "ingress", "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := intake.New(ctx, cfg, intake.Options{Roles: intake.Roles{Ingress: true}, HTTPAddr: "127.0.0.1:0"})
	if err == nil {
		_ = a.Stop(ctx)
		t.Fatal("ingress started without its streams")
	}
	if !errors.Is(err, stream.ErrNotReady) || !strings.Contains(err.Error(), envelope.StreamIn) ||
		!strings.Contains(err.Error(), "intake migrate") {
		t.Fatalf("app.New = %v, want a refusal naming %s and `intake migrate`", err, envelope.StreamIn)
	}
}

// TestEveryRoleWithItsOwnUser: ingress, processor and replayer, each a
// separate App with its own user, take a webhook through to INTAKE_OUT,
// replay, redeliver and reconcile it; none of them is refused anything on the way.
func TestEveryRoleWithItsOwnUser(t *testing.T) {
	srv := startServer(t)
	url := srv.ClientURL()
	migrateStreams(t, url)
	db := testrig.Database(t)

	var logs testenv.Buffer
	start := func(user string, roles intake.Roles) *testrig.App {
		return testrig.StartApp(t, roleConfig(t, url, user, db), intake.Options{Roles: roles,
			Log: logger(&logs).With("user", user)})
	}
	proc := start("processor", intake.Roles{Processor: true})
	rp := start("replayer", intake.Roles{Replayer: true})
	ing := start("ingress", intake.Roles{Ingress: true})

	sendEvent(t, proc.Config.Integrations[0].Config, ing.URL, &logs)

	api := rp.Client(operatorToken)
	ctx := context.Background()
	var key string
	testenv.Eventually(t, 30*time.Second, func() bool {
		ev, err := api.Event(ctx, "demo", "evt_1")
		key = ev.Key
		return err == nil && ev.Status == inbox.StatusProcessed
	}, "the event was never processed:\n%s", &logs)
	testenv.Eventually(t, 30*time.Second, func() bool { return streamMsgs(t, srv, envelope.StreamOut) == 1 },
		"INTAKE_OUT never got the processed event")
	testenv.Eventually(t, 30*time.Second, func() bool {
		ev, err := api.Event(ctx, "demo", "evt_1")
		return err == nil && len(ev.Deliveries) == 1
	}, "the processor never folded the delivery receipt")

	// The replayer scans the stream, gets the message and publishes it again.
	dry := false
	rep, err := api.StartReplay(ctx, apiclient.ReplayRequest{Selector: apiclient.Selector{Keys: []string{key}}, DryRun: &dry, Reason: "natsperm"})
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, logs.String())
	}
	if done := testrig.WaitReplay(t, api, rep.ID, 30*time.Second); done.State != "done" || done.Published != 1 {
		t.Fatalf("replay ended %s with %d published, want done with 1\n%s", done.State, done.Published, logs.String())
	}
	// A redelivery scans INTAKE_OUT and publishes the processed event again.
	red, err := api.StartRedelivery(ctx, apiclient.RedeliveryRequest{Selector: apiclient.RedeliverySelector{
		StreamSeq: &apiclient.SeqRange{From: 1, To: 10}}, DryRun: &dry, Reason: "natsperm"})
	if err != nil {
		t.Fatalf("redelivery: %v\n%s", err, logs.String())
	}
	if done := testrig.WaitReplay(t, api, red.ID, 30*time.Second); done.State != "done" || done.Published < 1 {
		t.Fatalf("redelivery ended %s with %d published, want done\n%s", done.State, done.Published, logs.String())
	}
	if rec, err := api.Reconcile(ctx, apiclient.ReconcileQuery{FromSeq: 1, ToSeq: 10}); err != nil || rec.Checked != 1 {
		t.Fatalf("reconcile: %+v, %v\n%s", rec, err, logs.String())
	}
	if strings.Contains(logs.String(), permDenied) {
		t.Fatalf("a role was refused a permission:\n%s", logs.String())
	}
}

// TestIngressUserIsConfined: ingress's user can publish webhooks and
// nothing more — not processed events, not stream administration, not
// reading what the processor publishes, not other roles' replies.
func TestIngressUserIsConfined(t *testing.T) {
	srv := startServer(t)
	url := srv.ClientURL()
	migrateStreams(t, url)
	var logs testenv.Buffer
	nc, err := stream.Connect(roleConfig(t, url, "ingress", "").NATS, "ingress", false, logger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := f(ctx); err == nil {
			t.Errorf("ingress's user may %s", what)
		}
	}
	// Allowed, as a control: a webhook publish is acknowledged.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, "intake.in.demo.test", []byte("{}")); err != nil {
		t.Fatalf("ingress cannot publish a webhook: %v\n%s", err, logs.String())
	}

	refused("publish a processed event", func(ctx context.Context) error {
		_, err := js.Publish(ctx, "intake.out.acme.demo.test", []byte("{}"))
		return err
	})
	refused("create a stream", func(ctx context.Context) error {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVIL", Subjects: []string{"evil.>"}})
		return err
	})
	refused("update a stream", func(ctx context.Context) error {
		_, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: envelope.StreamIn, Subjects: []string{"intake.in.>", "evil.>"}})
		return err
	})
	refused("delete a stream", func(ctx context.Context) error { return js.DeleteStream(ctx, envelope.StreamIn) })
	refused("read INTAKE_OUT's info", func(ctx context.Context) error {
		_, err := js.Stream(ctx, envelope.StreamOut)
		return err
	})
	refused("consume INTAKE_OUT", func(ctx context.Context) error {
		c, err := js.OrderedConsumer(ctx, envelope.StreamOut, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return err
		}
		_, err = c.Next(jetstream.FetchMaxWait(time.Second))
		return err
	})
	refused("get a message of INTAKE_IN", func(ctx context.Context) error {
		s, err := js.Stream(ctx, envelope.StreamIn) // allowed: the start-up check
		if err != nil {
			return err
		}
		_, err = s.GetMsg(ctx, 1)
		return err
	})
	// Another role's replies: the subscription is refused by the server.
	sub, err := nc.SubscribeSync(stream.InboxPrefix(config.DefaultInboxPrefix, "processor") + ".>")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	if got := streamMsgs(t, srv, envelope.StreamOut); got != 0 {
		t.Errorf("INTAKE_OUT holds %d messages published by ingress's user", got)
	}
	if got := streamMsgs(t, srv, envelope.StreamIn); got != 1 {
		t.Errorf("INTAKE_IN holds %d messages, want the 1 webhook", got)
	}
	if _, ok := streams(t, srv)["EVIL"]; ok {
		t.Error("ingress's user created a stream")
	}
	// Every refusal is logged at error, naming the subject.
	testenv.Eventually(t, 5*time.Second, func() bool {
		l := logs.String()
		return strings.Contains(l, permDenied) && strings.Contains(l, "intake.out.acme.demo.test") &&
			strings.Contains(l, "_INBOX_intake_processor.>")
	}, "the permission violations were not logged:\n%s", &logs)
}

// consumersOf is every consumer of the account as the server has it, by
// "stream/name" (no client permission involved).
func consumersOf(t *testing.T, srv *server.Server) map[string]server.ConsumerConfig {
	t.Helper()
	d, err := srv.JszAccount(&server.JSzOptions{Account: "INTAKE", Streams: true, Consumer: true, Config: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]server.ConsumerConfig{}
	for _, s := range d.Streams {
		for _, c := range s.Consumer {
			out[s.Name+"/"+c.Name] = *c.Config
		}
	}
	return out
}

// TestReplayerKeepsOffOtherConsumers: the replayer's user may create,
// pull from and delete its scan slots (replayer-scan-0..7) and no other
// consumer — not the processors' durable, not a shard's, not a
// subscriber's, none of which its permissions name. It still reads the
// processors' durables' info (reconcile and re-drive, read-only).
func TestReplayerKeepsOffOtherConsumers(t *testing.T) {
	srv := startServer(t)
	url := srv.ClientURL()
	migrateStreams(t, url)
	connect := func(user, inbox string) (*nats.Conn, jetstream.JetStream) {
		ncfg := roleConfig(t, url, user, "").NATS
		if inbox != "" {
			ncfg.InboxPrefix = inbox
		}
		nc, err := stream.Connect(ncfg, user, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		return nc, js
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, pjs := connect("processor", "")
	pcfg := roleConfig(t, url, "processor", "").Processor
	pcons, err := stream.EnsureProcessorConsumer(ctx, pjs, pcfg)
	if err != nil {
		t.Fatalf("the processor's user cannot create its consumer: %v", err)
	}
	// It reads its consumer's info to report a full window.
	if _, err := pcons.Info(ctx); err != nil {
		t.Fatalf("the processor's user cannot read its consumer's info: %v", err)
	}
	// A shard's durable, by the same shipped processor user.
	scfg := pcfg
	scfg.Shard = "a"
	if _, err := stream.EnsureProcessorConsumer(ctx, pjs, scfg, "demo", "other"); err != nil {
		t.Fatalf("the processor's user cannot create a shard's durable: %v", err)
	}
	if _, err := stream.EnsureReceiptsConsumer(ctx, pjs, scfg, "demo", "other"); err != nil {
		t.Fatalf("the processor's user cannot create a shard's receipts durable: %v", err)
	}
	// The example subscriber's durable on INTAKE_OUT, by its user.
	_, sjs := connect("subscriber", "_INBOX")
	if _, err := sjs.CreateOrUpdateConsumer(ctx, envelope.StreamOut, jetstream.ConsumerConfig{Durable: "example-subscriber",
		AckPolicy: jetstream.AckExplicitPolicy, FilterSubjects: []string{"intake.out.acme.demo.>", "intake.out.acme.other.>"}}); err != nil {
		t.Fatalf("the subscriber's user cannot create its durable: %v", err)
	}
	before := consumersOf(t, srv)

	nc, js := connect("replayer", "")
	attempt := func(f func(ctx context.Context) error) error {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return f(c)
	}
	// refused: the server never answered (it dropped the request); an
	// answer, even an error, would mean the request was let through.
	refused := func(err error) bool {
		return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrPermissionViolation)
	}
	filters := map[string][]string{
		envelope.StreamIn:  {"intake.in.demo.>", "intake.in.other.>"},
		envelope.StreamOut: {"intake.out.acme.demo.>", "intake.out.acme.other.>"},
	}
	// A pull request answered at once (a message or "no messages") when
	// it may be sent; a refused one is never answered.
	pull := func(streamName, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := nc.RequestWithContext(ctx, "$JS.API.CONSUMER.MSG.NEXT."+streamName+"."+name, []byte(`{"batch":1,"no_wait":true}`))
			return err
		}
	}
	for _, d := range []struct{ stream, name string }{
		{envelope.StreamIn, envelope.ConsumerName},
		{envelope.StreamIn, stream.ProcessorDurable("a")},
		{envelope.StreamOut, "example-subscriber"},
	} {
		if err := attempt(func(ctx context.Context) error { return js.DeleteConsumer(ctx, d.stream, d.name) }); !refused(err) {
			t.Errorf("the replayer's user may delete %s/%s: %v", d.stream, d.name, err)
		}
		if err := attempt(func(ctx context.Context) error {
			_, err := js.CreateOrUpdateConsumer(ctx, d.stream, jetstream.ConsumerConfig{Durable: d.name,
				AckPolicy: jetstream.AckExplicitPolicy, FilterSubjects: filters[d.stream]})
			return err
		}); !refused(err) {
			t.Errorf("the replayer's user may create or update %s/%s: %v", d.stream, d.name, err)
		}
		if err := attempt(pull(d.stream, d.name)); !refused(err) {
			t.Errorf("the replayer's user may pull from %s/%s: %v", d.stream, d.name, err)
		}
	}
	// A consumer of a name of its choosing: refused too.
	if err := attempt(func(ctx context.Context) error {
		_, err := js.CreateConsumer(ctx, envelope.StreamIn, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy,
			FilterSubjects: filters[envelope.StreamIn]})
		return err
	}); !refused(err) {
		t.Errorf("the replayer's user may create a consumer with a generated name: %v", err)
	}
	// Reconcile and re-drive read the processors' durables (read-only).
	for _, name := range []string{envelope.ConsumerName, stream.ProcessorDurable("a")} {
		if _, err := js.Consumer(ctx, envelope.StreamIn, name); err != nil {
			t.Errorf("the replayer's user cannot read %s's info: %v", name, err)
		}
	}
	// Its scan slots, on both streams: create, pull, delete.
	for _, streamName := range []string{envelope.StreamIn, envelope.StreamOut} {
		for i := range replayer.ScanSlots {
			name := replayer.ScanConsumerName(i)
			if _, err := js.CreateConsumer(ctx, streamName, jetstream.ConsumerConfig{Name: name, AckPolicy: jetstream.AckNonePolicy,
				InactiveThreshold: time.Minute, FilterSubjects: filters[streamName]}); err != nil {
				t.Fatalf("the replayer's user cannot create its scan slot %s/%s: %v", streamName, name, err)
			}
			if err := attempt(pull(streamName, name)); err != nil {
				t.Errorf("the replayer's user cannot pull from its scan slot %s/%s: %v", streamName, name, err)
			}
			if err := js.DeleteConsumer(ctx, streamName, name); err != nil {
				t.Errorf("the replayer's user cannot delete its scan slot %s/%s: %v", streamName, name, err)
			}
		}
	}

	after := consumersOf(t, srv)
	if len(after) != len(before) {
		t.Errorf("consumers after the replayer's attempts %v, want %v", slices.Collect(maps.Keys(after)), slices.Collect(maps.Keys(before)))
	}
	for k, b := range before {
		a, ok := after[k]
		if !ok || a.AckPolicy != b.AckPolicy || a.FilterSubject != b.FilterSubject || !slices.Equal(a.FilterSubjects, b.FilterSubjects) {
			t.Errorf("consumer %s after the replayer's attempts: %+v, want %+v", k, a, b)
		}
	}
}

// subscriberJS connects as the example subscriber's user, whose inbox
// "_INBOX_subscriber" lets a refused request be told from a lost reply,
// logging to logs; closed with the test.
func subscriberJS(t *testing.T, url string, logs *testenv.Buffer) jetstream.JetStream {
	t.Helper()
	ncfg := roleConfig(t, url, "subscriber", "").NATS
	ncfg.InboxPrefix = "_INBOX"
	nc, err := stream.Connect(ncfg, "subscriber", true, logger(logs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	return js
}

// TestAMissingPermissionIsNamed: a request the user may not send only
// times out on the client; the start-up check's error and the log say
// which permission was missing.
func TestAMissingPermissionIsNamed(t *testing.T) {
	srv := startServer(t)
	url := srv.ClientURL()
	migrateStreams(t, url)
	var logs testenv.Buffer
	// The example subscriber's user may not read stream info. Its inbox is
	// "_INBOX_subscriber": only the request is refused, not its reply.
	js := subscriberJS(t, url, &logs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := stream.Check(ctx, js, roleConfig(t, url, "subscriber", "").NATS.Stream, nil, envelope.StreamIn)
	subject := "$JS.API.STREAM.INFO." + envelope.StreamIn
	if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), subject) {
		t.Fatalf("Check = %v, want the permissions violation on %s", err, subject)
	}
	if !strings.Contains(logs.String(), permDenied) || !strings.Contains(logs.String(), subject) {
		t.Fatalf("the refusal was not logged:\n%s", logs.String())
	}
}

// confined connects as user (role's inbox) and returns a JetStream and a
// helper that fails the test when f succeeds.
func confined(t *testing.T, url, user string) (jetstream.JetStream, func(what string, f func(ctx context.Context) error)) {
	t.Helper()
	var logs testenv.Buffer
	nc, err := stream.Connect(roleConfig(t, url, user, "").NATS, user, false, logger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js, func(what string, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := f(ctx); err == nil {
			t.Errorf("%s's user may %s", user, what)
		}
	}
}

// TestProcessorAndAdminUsersAreConfined: the processor's user cannot publish
// deliveries, delete its consumer or touch streams; the
// admin's cannot delete or purge streams or publish messages.
func TestProcessorAndAdminUsersAreConfined(t *testing.T) {
	srv := startServer(t)
	url := srv.ClientURL()
	migrateStreams(t, url)

	js, refused := confined(t, url, "processor")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Allowed, as a control: its consumer with the pinned filter.
	if _, err := js.CreateOrUpdateConsumer(ctx, envelope.StreamIn, jetstream.ConsumerConfig{
		Durable: envelope.ConsumerName, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: envelope.SubjectInAll}); err != nil {
		t.Fatalf("the processor cannot create its consumer: %v", err)
	}
	refused("publish a delivery", func(ctx context.Context) error {
		_, err := js.Publish(ctx, "intake.in.demo.test", []byte("{}"))
		return err
	})
	// Not refused, and said so in docs/security.md: the permission's
	// trailing ">" also matches a narrower filter (intake.in.demo.>), so
	// the processor's user could narrow its own consumer. It can ack or
	// terminate whatever it pulls anyway: its credential is a high-value one.
	refused("delete its consumer", func(ctx context.Context) error {
		return js.DeleteConsumer(ctx, envelope.StreamIn, envelope.ConsumerName)
	})
	refused("create a stream", func(ctx context.Context) error {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVIL", Subjects: []string{"evil.>"}})
		return err
	})
	refused("delete a stream", func(ctx context.Context) error { return js.DeleteStream(ctx, envelope.StreamOut) })
	// Its user takes any durable's name (a shard's), but not the replayer's
	// scan slots, with one filter or several.
	for _, f := range [][]string{{"intake.in.demo.>"}, {"intake.in.demo.>", "intake.in.other.>"}} {
		refused("take a replayer scan slot", func(ctx context.Context) error {
			cc := jetstream.ConsumerConfig{Name: replayer.ScanConsumerName(0), AckPolicy: jetstream.AckNonePolicy, FilterSubjects: f}
			if len(f) == 1 {
				cc.FilterSubject, cc.FilterSubjects = f[0], nil
			}
			_, err := js.CreateConsumer(ctx, envelope.StreamIn, cc)
			return err
		})
	}

	adm, refusedAdmin := confined(t, url, "admin")
	refusedAdmin("delete a stream", func(ctx context.Context) error { return adm.DeleteStream(ctx, envelope.StreamIn) })
	refusedAdmin("purge a stream", func(ctx context.Context) error {
		s, err := adm.Stream(ctx, envelope.StreamIn)
		if err != nil {
			return err
		}
		return s.Purge(ctx)
	})
	refusedAdmin("publish a delivery", func(ctx context.Context) error {
		_, err := adm.Publish(ctx, "intake.in.demo.test", []byte("{}"))
		return err
	})
	if got := streamMsgs(t, srv, envelope.StreamIn); got != 0 {
		t.Errorf("INTAKE_IN holds %d messages published by users that may not", got)
	}
	if _, ok := streams(t, srv)["EVIL"]; ok {
		t.Error("the processor's user created a stream")
	}
	if _, ok := streams(t, srv)[envelope.StreamIn]; !ok {
		t.Error("INTAKE_IN was deleted")
	}
}

// TestShardOnTheShippedUsers: a shard (processor.shard) runs on the
// shipped users unchanged: its processor, as the processor user, creates
// and consumes its durables "processor-{shard}" and "receipts-{shard}",
// processes an event end to end and reports the message of an integration
// no shard takes (intake_processor_uncovered_messages); its replayer, as
// the replayer user, reads the ack floor of "processor-{shard}" and
// reconciles with it; nobody is refused anything.
func TestShardOnTheShippedUsers(t *testing.T) {
	srv := startServer(t)
	url := srv.ClientURL()
	migrateStreams(t, url)
	db := testrig.Database(t)

	var logs testenv.Buffer
	const shard = "a"
	shardConfig := func(user string) *config.Config {
		cfg := roleConfig(t, url, user, db)
		cfg.Processor.Shard = shard
		return cfg
	}
	// A message of an integration no shard lists (ingress accepts it when
	// its config does): the shard's processor reports it.
	inc, err := stream.Connect(roleConfig(t, url, "ingress", "").NATS, "ingress", false, logger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer inc.Close()
	ijs, _ := jetstream.New(inc)
	if _, err := ijs.Publish(context.Background(), envelope.SubjectIn("stray", "test"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	proc := testrig.StartApp(t, shardConfig("processor"), intake.Options{Roles: intake.Roles{Processor: true},
		Log: logger(&logs).With("user", "processor")})
	rp := testrig.StartApp(t, shardConfig("replayer"), intake.Options{Roles: intake.Roles{Replayer: true}, Log: logger(&logs).With("user", "replayer")})
	ing := testrig.StartApp(t, roleConfig(t, url, "ingress", db), intake.Options{Roles: intake.Roles{Ingress: true},
		Log: logger(&logs).With("user", "ingress")})

	sendEvent(t, proc.Config.Integrations[0].Config, ing.URL, &logs)

	// The stray message, seen at the processor's first look (at start).
	uncovered := func() map[string]float64 {
		out := map[string]float64{}
		mfs, err := proc.Metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "intake_processor_uncovered_messages" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "integration" {
						out[l.GetValue()] = m.GetGauge().GetValue()
					}
				}
			}
		}
		return out
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return len(uncovered()) > 0 },
		"the shard's processor never reported the message no shard takes:\n%s", &logs)
	if got := uncovered(); len(got) != 1 || got["stray"] != 1 {
		t.Errorf("intake_processor_uncovered_messages = %v, want stray: 1 only", got)
	}

	api := rp.Client(operatorToken)
	ctx := context.Background()
	testenv.Eventually(t, 30*time.Second, func() bool {
		ev, err := api.Event(ctx, "demo", "evt_1")
		return err == nil && ev.Status == inbox.StatusProcessed && len(ev.Deliveries) == 1
	}, "the shard's processor never processed the event and folded its receipt:\n%s", &logs)
	var rec apiclient.ReconcileResult
	testenv.Eventually(t, 30*time.Second, func() bool {
		rec, err = api.Reconcile(ctx, apiclient.ReconcileQuery{FromSeq: 1, ToSeq: 10})
		return err == nil && rec.AckFloor >= 1
	}, "the shard's replayer never read its durable's ack floor (last: %+v, %v):\n%s", &rec, &err, &logs)
	if rec.Shard != shard || rec.Checked != 1 || rec.Pending != 0 || len(rec.Missing) != 0 {
		t.Fatalf("reconcile: %+v, want shard %s, 1 checked, nothing pending or missing", rec, shard)
	}
	d, err := srv.JszAccount(&server.JSzOptions{Account: "INTAKE", Streams: true, Consumer: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, s := range d.Streams {
		for _, c := range s.Consumer {
			got[s.Name+"/"+c.Name] = true
		}
	}
	for _, want := range []string{envelope.StreamIn + "/" + stream.ProcessorDurable(shard), envelope.StreamReceipts + "/" + stream.ReceiptsDurable(shard)} {
		if !got[want] {
			t.Errorf("no durable %s (consumers: %v)", want, got)
		}
	}
	if got[envelope.StreamIn+"/"+envelope.ConsumerName] {
		t.Errorf("a durable %q exists beside the shard's", envelope.ConsumerName)
	}
	if strings.Contains(logs.String(), permDenied) {
		t.Fatalf("a role was refused a permission:\n%s", logs.String())
	}
}

// sendEvent posts evt_1 of the demo integration, signed with cfg, to
// ingress at url and fails the test unless it is accepted.
func sendEvent(t *testing.T, cfg provider.Config, url string, logs *testenv.Buffer) {
	t.Helper()
	body := []byte(`{"type":"invoice.paid","n":1}`)
	h, err := provider.Sign(cfg, 0, "evt_1", body, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/demo", bytes.NewReader(body))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ingress answered %d\n%s", resp.StatusCode, logs.String())
	}
}
