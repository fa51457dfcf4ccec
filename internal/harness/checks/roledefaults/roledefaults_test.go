package roledefaults

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/ingress"
	"github.com/intakehq/intake/internal/harness/dev"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/internal/httpserver"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/subscriber"
	"github.com/intakehq/intake/processor"
	"github.com/intakehq/intake/replayer"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The defaults as documented (docs/configuration.md's table and the
// fields' doc comments), written out rather than read from the constants, so
// a changed constant fails here too.
var (
	documentedProcessor = config.Processor{
		AckWait: 30 * time.Second, MaxDeliver: 10, BatchSize: 256, BatchWait: 20 * time.Millisecond, Concurrency: 2,
		Backoff: []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute},
		// replicas × batch_size × (2 × concurrency + 1): docs/configuration.md, docs/scaling.md.
		MaxAckPending: 2560, Replicas: 2,
	}
	documentedOutbox = config.Outbox{PollInterval: time.Second, RelayAfter: 5 * time.Second, BatchSize: 500, Retention: 72 * time.Hour}
)

type rig struct {
	store *store.Store
	js    jetstream.JetStream
}

// setup starts a private NATS JetStream (with Intake's streams at their
// defaults) and a migrated Postgres database.
func setup(t *testing.T) rig {
	t.Helper()
	j := testrig.NATS(t, config.Stream{}.WithDefaults())
	return rig{store: testrig.Store(t, testrig.Database(t), 4), js: j.JS}
}

func TestRolesFromZeroConfigGetTheDocumentedDefaults(t *testing.T) {
	r := setup(t)

	t.Run("processor", func(t *testing.T) {
		p, err := processor.New(processor.Options{Store: r.store, JS: r.js})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Config(); !reflect.DeepEqual(got, documentedProcessor) {
			t.Errorf("processor config = %+v, want %+v", got, documentedProcessor)
		}
	})
	t.Run("relay", func(t *testing.T) {
		rl, err := processor.NewRelay(processor.RelayOptions{Store: r.store, JS: r.js})
		if err != nil {
			t.Fatal(err)
		}
		if got := rl.Config(); got != documentedOutbox {
			t.Errorf("relay config = %+v, want %+v", got, documentedOutbox)
		}
		// relay_after: half a duplicate window shorter than 10s, as config.Load does.
		short, err := processor.NewRelay(processor.RelayOptions{Store: r.store, JS: r.js, DuplicateWindow: 4 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if got := short.Config().RelayAfter; got != 2*time.Second {
			t.Errorf("relay_after under a 4s duplicate window = %s, want 2s", got)
		}
	})
	t.Run("receipt folder", func(t *testing.T) {
		f, err := processor.NewReceiptFolder(processor.ReceiptFolderOptions{Store: r.store, JS: r.js})
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Config(); !reflect.DeepEqual(got, documentedProcessor) {
			t.Errorf("receipt folder config = %+v, want %+v", got, documentedProcessor)
		}
	})
	t.Run("ingress", func(t *testing.T) {
		cfg := &config.Config{Integrations: []config.Integration{{Name: "demo", Tenant: "acme",
			Config: provider.Config{Provider: "standard", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}}}}
		svc, err := ingress.New(ingress.Options{Config: cfg, JS: r.js})
		if err != nil {
			t.Fatal(err)
		}
		if got := svc.PublishTimeout(); got != 5*time.Second {
			t.Errorf("publish timeout = %s, want 5s (a zero one answered every webhook 503)", got)
		}
		if host, _ := os.Hostname(); svc.Instance() != host {
			t.Errorf("instance = %q, want the hostname %q", svc.Instance(), host)
		}
		in, ok := svc.Integration("demo")
		if !ok {
			t.Fatal("integration demo missing")
		}
		if in.MaxBodyBytes != 1<<20 || in.Tolerance != 5*time.Minute {
			t.Errorf("integration max_body_bytes = %d, tolerance = %s; want 1 MiB, 5m", in.MaxBodyBytes, in.Tolerance)
		}
		if cfg.NATS.PublishTimeout != 0 || cfg.Integrations[0].MaxBodyBytes != 0 {
			t.Error("ingress.New wrote its defaults into the caller's config")
		}
		srv := httpserver.New(":0", nil, config.Ingress{}.Timeouts())
		if srv.ReadHeaderTimeout != 5*time.Second || srv.ReadTimeout != 30*time.Second || srv.WriteTimeout != 30*time.Second {
			t.Errorf("server timeouts = %s / %s / %s, want 5s / 30s / 30s", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout)
		}
	})
	t.Run("replayer", func(t *testing.T) {
		rp, err := replayer.New(replayer.Options{Store: r.store, JS: r.js})
		if err != nil {
			t.Fatal(err)
		}
		got := rp.Options()
		if got.DefaultRate != 100 || got.MaxRate != 10_000 || got.MaxMatched != 1_000_000 || got.MaxRunning != 2 ||
			got.ResumeInterval != 10*time.Second || got.PublishTimeout != 10*time.Second || got.RetryFor != 2*time.Minute || got.Log == nil ||
			got.RedriveInterval != time.Minute || got.RedriveLookback != 10*time.Minute || got.ServerWatchInterval != 5*time.Second {
			t.Errorf("replayer options = %+v", got)
		}
	})
	t.Run("subscriber", func(t *testing.T) {
		o := subscriber.Options{}.WithDefaults()
		if o.AckWait != 30*time.Second || o.MaxDeliver != -1 ||
			!reflect.DeepEqual(o.Backoff, []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}) {
			t.Errorf("subscriber options = %+v", o)
		}
		// The defaults reach the server's consumer.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- subscriber.Consume(ctx, r.js, subscriber.Options{Durable: "defaults"}, func(context.Context, subscriber.Message) error { return nil })
		}()
		var info *jetstream.ConsumerInfo
		testenv.Eventually(t, 10*time.Second, func() bool {
			c, err := r.js.Consumer(ctx, envelope.StreamOut, "defaults")
			if err != nil {
				return false
			}
			info = c.CachedInfo()
			return true
		}, "subscriber consumer never created")
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if info.Config.AckWait != 30*time.Second || info.Config.MaxDeliver != -1 {
			t.Errorf("consumer ack_wait = %s, max_deliver = %d; want 30s, -1", info.Config.AckWait, info.Config.MaxDeliver)
		}
	})
	t.Run("dev", func(t *testing.T) {
		o := dev.Options{}.WithDefaults()
		if o.DataDir != ".intake" || o.NATSAddr != "127.0.0.1:4222" || o.HTTPAddr != "127.0.0.1:8080" {
			t.Errorf("dev options = data dir %q, nats %q, http %q", o.DataDir, o.NATSAddr, o.HTTPAddr)
		}
	})
}

// TestConstructorsRefuseBadValues: a bad value is an error naming its
// field, never silently replaced by a default.
func TestConstructorsRefuseBadValues(t *testing.T) {
	r := setup(t)
	errOf := func(_ any, err error) error { return err }
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"processor batch size", errOf(processor.New(processor.Options{Store: r.store, JS: r.js,
			Config: config.Processor{BatchSize: -1}})), "processor.batch_size"},
		{"processor concurrency", errOf(processor.New(processor.Options{Store: r.store, JS: r.js,
			Config: config.Processor{Concurrency: -1}})), "processor.concurrency"},
		{"processor needs a store", errOf(processor.New(processor.Options{JS: r.js})), "Store"},
		{"relay after beyond half the window", errOf(processor.NewRelay(processor.RelayOptions{Store: r.store, JS: r.js,
			DuplicateWindow: 4 * time.Second, Config: config.Outbox{RelayAfter: 3 * time.Second}})), "outbox.relay_after"},
		{"relay batch size", errOf(processor.NewRelay(processor.RelayOptions{Store: r.store, JS: r.js,
			Config: config.Outbox{BatchSize: -1}})), "outbox.batch_size"},
		{"receipt folder ack wait", errOf(processor.NewReceiptFolder(processor.ReceiptFolderOptions{Store: r.store, JS: r.js,
			Config: config.Processor{AckWait: time.Millisecond}})), "processor.ack_wait"},
		{"ingress publish timeout", errOf(ingress.New(ingress.Options{Config: &config.Config{NATS: config.NATS{PublishTimeout: -time.Second}}, JS: r.js})),
			"nats.publish_timeout"},
		{"replayer rates", errOf(replayer.New(replayer.Options{Store: r.store, JS: r.js, DefaultRate: 500, MaxRate: 50})),
			"DefaultRate"},
		{"replayer running", errOf(replayer.New(replayer.Options{Store: r.store, JS: r.js, MaxRunning: -1})), "MaxRunning"},
		{"replayer redrive lookback", errOf(replayer.New(replayer.Options{Store: r.store, JS: r.js, RedriveLookback: -time.Minute})),
			"RedriveLookback"},
		{"subscriber durable", subscriber.Consume(context.Background(), r.js, subscriber.Options{}, nil), "Durable"},
		{"subscriber max deliver", subscriber.Consume(context.Background(), r.js, subscriber.Options{Durable: "x", MaxDeliver: -3}, nil),
			"MaxDeliver"},
		{"dev nats addr", dev.Options{NATSAddr: "nowhere"}.WithDefaults().Validate(), "--nats-addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", tt.err, tt.want)
			}
		})
	}
}
