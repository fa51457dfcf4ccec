package main

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/replayer/apiclient"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func runCLI(t *testing.T, ctx context.Context, out *testenv.Buffer, args ...string) error {
	t.Helper()
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(out)
	return root.ExecuteContext(ctx)
}

// TestDevQuickstart is the README's first minute, through the CLI: `intake
// dev` with no DATABASE_URL starts a private Postgres and an embedded NATS;
// `intake send` is accepted, the same delivery again is a duplicate, the API
// shows the event processed, and a consumer on intake.out.> gets exactly one
// message.
func TestDevQuickstart(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	t.Setenv("INTAKE_NATS_URL", "")
	t.Setenv("INTAKE_CONFIG", "")
	dir, err := os.MkdirTemp("", "intake-dev-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	devOut := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- runCLI(t, ctx, devOut, "dev", "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--nats-addr", "127.0.0.1:0",
			"--postgres-port", strconv.Itoa(freePort(t)), "--log-level", "warn")
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("intake dev: %v", err)
		}
	})
	var base, natsURL string
	testenv.Eventually(t, 60*time.Second, func() bool {
		select {
		case err := <-done:
			t.Fatalf("intake dev exited early: %v\n%s", err, devOut.String())
		default:
		}
		s := devOut.String()
		m := regexp.MustCompile(`webhooks\s+(http://\S+)/webhooks/`).FindStringSubmatch(s)
		n := regexp.MustCompile(`nats\s+(nats://\S+)`).FindStringSubmatch(s)
		if m == nil || n == nil {
			return false
		}
		base, natsURL = m[1], n[1]
		return true
	}, "intake dev never printed its banner")
	if !strings.Contains(devOut.String(), "private cluster") {
		t.Fatalf("banner does not report the private Postgres:\n%s", devOut.String())
	}
	// The example keeps the embedded server's fast default, and dev says so.
	if !strings.Contains(devOut.String(), "fsync every 2 minutes (nats.sync_always: false") {
		t.Fatalf("banner does not say what the embedded NATS syncs:\n%s", devOut.String())
	}

	send := func() string {
		out := &testenv.Buffer{}
		if err := runCLI(t, context.Background(), out, "send", "--integration", "demo", "--url", base, "--id", "evt_quickstart"); err != nil {
			t.Fatalf("intake send: %v\n%s", err, out.String())
		}
		return out.String()
	}
	if out := send(); !strings.Contains(out, `"status":"accepted"`) {
		t.Fatalf("first send:\n%s", out)
	}
	if out := send(); !strings.Contains(out, `"status":"duplicate"`) {
		t.Fatalf("second send:\n%s", out)
	}

	api := apiclient.New(base, "dev-operator-token-change-me", nil)
	testenv.Eventually(t, 30*time.Second, func() bool {
		ev, err := api.Event(context.Background(), "demo", "evt_quickstart")
		return err == nil && ev.Status == "processed"
	}, "API never showed the event processed")

	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// The example's envelope key: dev signs what ingress publishes, and the
	// processor (which applied it) verified it.
	in, err := js.Stream(context.Background(), "INTAKE_IN")
	if err != nil {
		t.Fatal(err)
	}
	if raw, err := in.GetMsg(context.Background(), 1); err != nil || !strings.HasPrefix(raw.Header.Get("Intake-Envelope-Signature"), "v1=") {
		t.Fatalf("the dev pipeline's INTAKE_IN message is not signed (%v)", err)
	}
	cons, err := js.OrderedConsumer(context.Background(), "INTAKE_OUT", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"intake.out.>"}})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the relay, then read everything the stream holds.
	var got []jetstream.Msg
	testenv.Eventually(t, 30*time.Second, func() bool {
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			return false
		}
		for m := range batch.Messages() {
			got = append(got, m)
		}
		return len(got) > 0
	}, "no processed message on intake.out.>")
	batch, err := cons.Fetch(100, jetstream.FetchMaxWait(time.Second))
	if err == nil {
		for m := range batch.Messages() {
			got = append(got, m)
		}
	}
	if len(got) != 1 || got[0].Headers().Get("Intake-Key") != "demo/main/evt_quickstart" {
		t.Fatalf("intake.out.> delivered %d messages, want exactly 1 for demo/main/evt_quickstart", len(got))
	}

	// A newcomer's first failure, as the banner says: demo.quarantine is
	// quarantined on purpose, and a replay processes it.
	if !strings.Contains(devOut.String(), "send --integration demo --type demo.quarantine") {
		t.Fatalf("the banner does not say how to try a failure:\n%s", devOut.String())
	}
	out := &testenv.Buffer{}
	if err := runCLI(t, context.Background(), out, "send", "--integration", "demo", "--url", base, "--id", "evt_q", "--type", "demo.quarantine"); err != nil {
		t.Fatalf("intake send demo.quarantine: %v\n%s", err, out.String())
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		ev, err := api.Event(context.Background(), "demo", "evt_q")
		return err == nil && ev.Status == "quarantined"
	}, "demo.quarantine was never quarantined")
	no := false
	if _, err := api.StartReplay(context.Background(), apiclient.ReplayRequest{Selector: apiclient.Selector{Keys: []string{"demo/main/evt_q"}},
		DryRun: &no, Reason: "trying a replay"}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		ev, err := api.Event(context.Background(), "demo", "evt_q")
		return err == nil && ev.Status == "processed"
	}, "the replay of the quarantined demo event never processed it")
}
