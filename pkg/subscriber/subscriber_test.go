package subscriber_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/subscriber"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func publishOut(t *testing.T, js jetstream.JetStream, tenant, id, execution string) {
	t.Helper()
	k := envelope.Key{Integration: "demo", Account: "main", EventID: id}
	m := nats.NewMsg(envelope.SubjectOut(tenant, "demo", "invoice.paid"))
	m.Data = []byte(`{"id":"` + id + `"}`)
	m.Header.Set(envelope.HeaderMsgID, execution)
	m.Header.Set(envelope.HeaderKey, k.String())
	m.Header.Set(envelope.HeaderTenant, tenant)
	m.Header.Set(envelope.HeaderEventType, "invoice.paid")
	m.Header.Set(envelope.HeaderExecutionID, execution)
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func TestConsumeFiltersByTenantAndRedeliversOnError(t *testing.T) {
	js := testrig.NATS(t, config.Stream{Replicas: 1, MaxAge: time.Hour, DuplicateWindow: time.Minute, MaxBytes: -1}).JS
	publishOut(t, js, "acme", "evt_1", "exec-1")
	publishOut(t, js, "globex", "evt_2", "exec-2") // another tenant: not ours
	publishOut(t, js, "acme", "evt_3", "exec-3")

	var mu sync.Mutex
	seen := map[string]int{}
	failedOnce := false
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- subscriber.Consume(ctx, js, subscriber.Options{Durable: "test", Tenant: "acme", Backoff: []time.Duration{50 * time.Millisecond}},
			func(_ context.Context, m subscriber.Message) error {
				mu.Lock()
				defer mu.Unlock()
				seen[m.Key.String()+"|"+m.ExecutionID+"|"+m.Tenant]++
				if m.Key.EventID == "evt_3" && !failedOnce {
					failedOnce = true
					return errors.New("downstream busy")
				}
				return nil
			})
	}()
	testenv.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["demo/main/evt_1|exec-1|acme"] >= 1 && seen["demo/main/evt_3|exec-3|acme"] >= 2
	}, "subscriber never saw both acme events (evt_3 twice: once failed)")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// Stopped: the counts are final.
	if a, b := seen["demo/main/evt_1|exec-1|acme"], seen["demo/main/evt_3|exec-3|acme"]; a != 1 || b != 2 {
		t.Fatalf("evt_1 handled %d times, evt_3 %d times; want 1 and 2 (once failed)", a, b)
	}
	for k := range seen {
		if k == "demo/main/evt_2|exec-2|globex" {
			t.Fatal("subscriber for tenant acme received globex's event")
		}
	}
}
