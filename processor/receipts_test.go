package processor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/processor"
)

// TestPoisonedReceiptDoesNotStopCounting: a receipt Postgres refuses (a NUL
// in a text column) sits in a batch with good ones and before later ones.
// The good receipts fold, delivery_count keeps counting, the bad one is
// counted and terminated. The folder used to retry the whole batch forever.
func TestPoisonedReceiptDoesNotStopCounting(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	r.publish("evt_1", `{"n":1}`, "")
	r.run(processor.Options{})
	r.settled(1)

	receipt := func(id, instance string, status int) {
		t.Helper()
		b, err := envelope.MarshalReceipt(envelope.Receipt{ID: id, Key: key("evt_1"), ReceivedAt: time.Now(),
			Instance: instance, StatusCode: status, Answer: "duplicate"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.js.Publish(context.Background(), envelope.SubjectReceipt("demo"), b); err != nil {
			t.Fatal(err)
		}
	}
	// ParseReceipt refuses what it can see is wrong (a NUL in a text value:
	// malformed, terminated); for the rest, a value Postgres refuses is
	// made here by a constraint, as a schema the receipt predates would.
	if _, err := r.db.Exec(context.Background(),
		`ALTER TABLE intake.deliveries ADD CONSTRAINT poison CHECK (instance <> 'ingress-poison')`); err != nil {
		t.Fatal(err)
	}
	receipt("r-1", "ingress-a", 200)
	receipt("r-poison", "ingress-poison", 200)
	receipt("r-malformed", "ingress-\x00", 200)
	receipt("r-2", "ingress-b", 200)

	m := telemetry.NewMetrics()
	f, err := processor.NewReceiptFolder(processor.ReceiptFolderOptions{Store: r.store, JS: r.js, Metrics: m,
		Config: config.Processor{AckWait: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	count := func() int {
		return r.count(`SELECT delivery_count FROM intake.inbox WHERE event_id = 'evt_1'`)
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return count() == 3 },
		"delivery_count never 3 (the original and r-1, r-2) past a poisoned receipt")
	// Later receipts are counted too: the folder is not stuck.
	for i := range 3 {
		receipt(fmt.Sprintf("r-later-%d", i), "ingress-c", 200)
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return count() == 6 },
		"delivery_count never 6 after later receipts")
	if got := testutil.ToFloat64(m.ReceiptsRefused); got != 1 {
		t.Errorf("receipts_refused_total = %v, want 1", got)
	}
	if n := r.count(`SELECT count(*) FROM intake.deliveries WHERE receipt_id = 'r-poison'`); n != 0 {
		t.Errorf("the refused receipt is in the history %d times", n)
	}
}

// TestRefusalSummariesFoldOnceAndOnlyForTheirSubject: ingress's refusal
// summaries ride the receipt subjects; the folder stores each once (a
// redelivered summary is not counted twice) and terminates one that speaks
// for an integration other than its subject's, or of a kind it does not
// know, without stopping the receipts beside them.
func TestRefusalSummariesFoldOnceAndOnlyForTheirSubject(t *testing.T) {
	t.Parallel()
	r := setup(t, "")
	at := time.Now().UTC().Truncate(time.Second)
	summary := func(subject, id, integration, kind string) {
		t.Helper()
		b, err := envelope.MarshalRefusalSummary(envelope.RefusalSummary{ID: id, Integration: integration, Instance: "ingress-0",
			WindowStart: at, WindowEnd: at.Add(10 * time.Second),
			Counts: []envelope.RefusalCount{{StatusCode: 401, Reason: "bad_signature", Count: 4}, {StatusCode: 413, Reason: "too_large", Count: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(subject)
		msg.Header.Set(envelope.HeaderReceiptKind, kind)
		msg.Data = b
		if _, err := r.js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	summary(envelope.SubjectReceipt("demo"), "s-1", "demo", envelope.ReceiptKindRefusals)
	summary(envelope.SubjectReceipt("demo"), "s-1", "demo", envelope.ReceiptKindRefusals) // sent again
	summary(envelope.SubjectReceipt("other"), "s-2", "demo", envelope.ReceiptKindRefusals)
	summary(envelope.SubjectReceipt("demo"), "s-3", "demo", "gossip")
	summary(envelope.SubjectReceipt("demo"), "s-4", "demo", envelope.ReceiptKindRefusals)

	f, err := processor.NewReceiptFolder(processor.ReceiptFolderOptions{Store: r.store, JS: r.js,
		Config: config.Processor{AckWait: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	testenv.Eventually(t, 20*time.Second, func() bool {
		return r.count(`SELECT count(*) FROM intake.ingress_refusals WHERE summary_id = 's-4'`) == 2
	}, "the last summary was never folded")
	if n := r.count(`SELECT coalesce(sum(refusals), 0)::int FROM intake.ingress_refusals WHERE integration = 'demo'`); n != 10 {
		t.Errorf("demo's refusals = %d, want 10 (s-1 once and s-4, each 4 + 1)", n)
	}
	if n := r.count(`SELECT count(*) FROM intake.ingress_refusals WHERE summary_id IN ('s-2', 's-3')`); n != 0 {
		t.Errorf("%d rows of a summary for another subject or of an unknown kind", n)
	}
	counts, err := r.store.RefusalsSince(context.Background(), at.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 2 || counts[0] != (store.RefusalCount{Integration: "demo", StatusCode: 401, Reason: "bad_signature", Count: 8}) ||
		counts[1] != (store.RefusalCount{Integration: "demo", StatusCode: 413, Reason: "too_large", Count: 2}) {
		t.Errorf("RefusalsSince = %+v", counts)
	}
}
