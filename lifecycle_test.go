package intake_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/processor"
)

// lifecycleConfig is a configuration for one role against a fresh embedded
// nats-server and a fresh, migrated database.
func lifecycleConfig(t *testing.T) (*config.Config, jetstream.JetStream) {
	t.Helper()
	n := testenv.NATS(t)
	dbURL := testenv.Postgres(t)
	if err := store.Migrate(context.Background(), dbURL, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
processor: {ack_wait: 2s}
integrations:
  - {name: demo, provider: standard, tenant: acme, account: main, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.URL, cfg.Postgres.URL = n.URL(), dbURL
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := stream.Ensure(ctx, js, cfg.NATS.Stream); err != nil { // as `intake migrate` does
		t.Fatal(err)
	}
	return cfg, js
}

// blockProcessorConsumer makes the processor's consumer impossible to
// create: a durable of the same name already exists with a deliver policy
// JetStream refuses to update. Only an operator deleting it would help.
func blockProcessorConsumer(t *testing.T, cfg *config.Config, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := stream.Ensure(ctx, js, cfg.NATS.Stream); err != nil {
		t.Fatal(err)
	}
	cc := stream.ProcessorConsumerConfig(cfg.Processor)
	cc.DeliverPolicy = jetstream.DeliverNewPolicy
	if _, err := js.CreateConsumer(ctx, envelope.StreamIn, cc); err != nil {
		t.Fatal(err)
	}
}

const refusal = "deliver policy can not be updated"

// TestAProcessorThatCannotConsumeFailsReadyzAndStop: the processor role
// cannot create its consumer. The App reports it on /readyz (503, with the
// reason) and through Failed, and Stop returns the reason as a typed error.
func TestAProcessorThatCannotConsumeFailsReadyzAndStop(t *testing.T) {
	t.Parallel()
	cfg, js := lifecycleConfig(t)
	blockProcessorConsumer(t, cfg, js)

	ctx := context.Background()
	a, err := intake.New(ctx, cfg, intake.Options{Roles: intake.Roles{Processor: true}, HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	t.Cleanup(func() { _ = a.Stop(ctx) })
	if err := a.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	select {
	case <-a.Failed():
	case <-time.After(30 * time.Second):
		t.Fatal("the App never failed although its processor cannot consume")
	}

	resp, err := http.Get("http://" + a.Addr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "processor: cannot consume") ||
		!strings.Contains(string(body), refusal) {
		t.Fatalf("/readyz = %d %q, want 503 naming the processor and %q", resp.StatusCode, body, refusal)
	}

	err = a.Stop(ctx)
	if !errors.Is(err, processor.ErrCannotConsume) || !errors.Is(err, stream.ErrRefused) || !strings.Contains(err.Error(), refusal) {
		t.Fatalf("Stop = %v, want processor.ErrCannotConsume wrapping stream.ErrRefused and %q", err, refusal)
	}
}

// TestRunReturnsWhyItsProcessorCannotRun: app.Run, as `intake processor`
// calls it, returns (so the process exits non-zero) with the reason, and
// logs it, instead of restarting a consumer that can never be created.
func TestRunReturnsWhyItsProcessorCannotRun(t *testing.T) {
	t.Parallel()
	cfg, js := lifecycleConfig(t)
	blockProcessorConsumer(t, cfg, js)

	ctx, cancel := context.WithCancel(context.Background())
	var logs testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- intake.Run(ctx, cfg, intake.Options{Roles: intake.Roles{Processor: true}, HTTPAddr: "127.0.0.1:0",
			Log: slog.New(slog.NewTextHandler(&logs, nil))})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err == nil || !strings.Contains(err.Error(), refusal) {
			t.Fatalf("app.Run = %v, want the reason: %q", err, refusal)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("app.Run kept running a processor that cannot consume:\n%s", logs.String())
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, refusal) {
		t.Fatalf("the reason was not logged as an error:\n%s", l)
	}
}

// TestADeletedProcessorConsumerIsCreatedAgain: losing the consumer is not a
// failure while it can be re-created: the processor creates it again, /readyz
// is 200 again, and the App keeps running.
func TestADeletedProcessorConsumerIsCreatedAgain(t *testing.T) {
	t.Parallel()
	cfg, js := lifecycleConfig(t)
	ctx := context.Background()
	a, err := intake.New(ctx, cfg, intake.Options{Roles: intake.Roles{Processor: true}, HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	ready := func() bool {
		resp, err := http.Get("http://" + a.Addr().String() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	consumer := func() (jetstream.Consumer, bool) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err := js.Consumer(cctx, envelope.StreamIn, envelope.ConsumerName)
		return c, err == nil
	}
	testenv.Eventually(t, 30*time.Second, func() bool { _, ok := consumer(); return ok && ready() }, "the processor never became ready")
	first, _ := consumer()
	created := first.CachedInfo().Created

	if err := js.DeleteConsumer(ctx, envelope.StreamIn, envelope.ConsumerName); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		c, ok := consumer()
		return ok && c.CachedInfo().Created.After(created) && ready()
	}, "the deleted consumer was not created again")
	select {
	case <-a.Failed():
		t.Fatal("the App failed although its consumer came back")
	default:
	}
}

// TestNewFailsBeforeListening: a construction error (here, a schema that is
// not migrated) leaves no listener or role behind.
func TestNewFailsBeforeListening(t *testing.T) {
	t.Parallel()
	cfg, _ := lifecycleConfig(t)
	cfg.Postgres.URL = testenv.Postgres(t) // empty: not migrated
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()
	_, err = intake.New(context.Background(), cfg, intake.Options{Roles: intake.Roles{Ingress: true, Processor: true, Replayer: true},
		HTTPAddr: addr})
	if !errors.Is(err, store.ErrNotMigrated) {
		t.Fatalf("app.New = %v, want store.ErrNotMigrated", err)
	}
	// Nothing holds the address (the port is still free to bind), and
	// goleak in TestMain checks that New closed its connections.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address app.New was given is taken after it failed: %v", err)
	}
	ln.Close()
}
