package processor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
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
