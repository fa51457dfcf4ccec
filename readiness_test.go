package intake_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/processor"
)

// TestEveryBatchFailingIsNotReady is issue 36's "0 processed, /readyz
// 200": a processor whose every batch fails in Intake's own writes (here a
// trigger refuses every inbox row, as the encoding failures did) reports
// not ready, saying why, while it retries; once the writes succeed again
// the events are processed and it is ready.
func TestEveryBatchFailingIsNotReady(t *testing.T) {
	t.Parallel()
	// Quick redeliveries, never used up: the batches fail in a row soon.
	p := startPipeline(t, func(c *config.Config) {
		c.Processor.Backoff, c.Processor.MaxDeliver = []time.Duration{100 * time.Millisecond}, 1000
	})
	ctx := context.Background()
	if _, err := p.db.Exec(ctx, `
		CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'inbox refused by the test'; END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON intake.inbox FOR EACH ROW EXECUTE FUNCTION refuse()`); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, p.base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before = %d %q", code, body)
	}
	const events = processor.NotReadyAfter + 2
	for i := range events {
		id := fmt.Sprintf("evt_%d", i)
		if code, a, _ := p.post(p.sign("demo", id, demoBody(id, "x"), time.Now())); code != http.StatusOK {
			t.Fatalf("post = %d %+v", code, a)
		}
	}
	var body string
	testenv.Eventually(t, 60*time.Second, func() bool {
		var code int
		code, body = get(t, p.base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "inbox refused by the test")
	}, "/readyz never said the batches fail")
	if !strings.Contains(body, "processor") || !strings.Contains(body, "committed nothing") {
		t.Errorf("/readyz = %q, want the processor's batches named", body)
	}

	if _, err := p.db.Exec(ctx, `DROP TRIGGER refuse ON intake.inbox`); err != nil {
		t.Fatal(err)
	}
	p.tr.Settled(t, events, 90*time.Second)
	testenv.Eventually(t, 30*time.Second, func() bool { code, _ := get(t, p.base+"/readyz"); return code == http.StatusOK },
		"/readyz never ready again once batches commit")
}
