package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/replayer/apiclient"
)

// TestStatusCommand (issue 34 item 3): `intake status` prints the
// backlog and each integration's last hour; -o json is the API's answer.
func TestStatusCommand(t *testing.T) {
	t.Parallel()
	r := startOperatorRig(t)
	r.publish("evt_1", "evt_2", "evt_3")

	out, errOut, code := r.cli("", cliViewer, "status", "-o", "json")
	var s apiclient.Status
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
		t.Fatalf("status -o json: exit %d\n%s%s", code, out, errOut)
	}
	if len(s.Integrations) != 1 || s.Integrations[0].Name != "demo" || s.Integrations[0].Accepted != 3 ||
		s.Integrations[0].PerSecond <= 0 || s.Stream.Durable != "processor" || s.Window != "1h0m0s" ||
		s.Integrations[0].Backlog == nil || *s.Integrations[0].Backlog != 0 {
		t.Fatalf("status = %+v", s)
	}
	// Ingress's refusals as the receipt folder stores them (the summaries'
	// path: TestRejectionsPublishNothing).
	if _, err := r.db.Exec(context.Background(), `INSERT INTO intake.ingress_refusals
			(summary_id, integration, instance, window_start, window_end, status_code, reason, refusals)
		VALUES ('s-1', 'demo', 'ingress-0', now() - interval '20 seconds', now() - interval '10 seconds', 401, 'bad_signature', 9),
		       ('s-1', 'demo', 'ingress-0', now() - interval '20 seconds', now() - interval '10 seconds', 429, 'rate_limited', 3)`); err != nil {
		t.Fatal(err)
	}
	out, _, code = r.cli("", cliViewer, "status")
	if code != 0 || !strings.Contains(out, "INTAKE_IN (durable processor)") || !strings.Contains(out, "RETRYING NOW") ||
		!strings.Contains(out, "demo") || !strings.Contains(out, "OLDEST WAITING") || !strings.Contains(out, "BACKLOG") ||
		!strings.Contains(out, "12 (401 bad_signature 9, 429 rate_limited 3)") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	// Three events in an hour are not 0.00 per second.
	if !strings.Contains(out, "<0.01") {
		t.Errorf("status: 3 events in the hour printed as no rate:\n%s", out)
	}

	// --watch prints again until interrupted, then exits 0.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := &printsWatcher{want: 2, stop: cancel}
	root := newRoot()
	root.SetArgs([]string{"status", "--watch", "200ms", "--server", r.base, "--token", cliViewer})
	root.SetOut(w)
	root.SetErr(io.Discard)
	if err := root.ExecuteContext(ctx); err != nil || !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("status --watch: %v (context: %v)\n%s", err, ctx.Err(), w.b.String())
	}
}

// printsWatcher counts the status reports written to it and calls stop
// (the interrupt) once there are want of them.
type printsWatcher struct {
	b    bytes.Buffer
	want int
	stop func()
}

func (p *printsWatcher) Write(b []byte) (int, error) {
	n, err := p.b.Write(b)
	if strings.Count(p.b.String(), "status at ") >= p.want {
		p.stop()
	}
	return n, err
}
