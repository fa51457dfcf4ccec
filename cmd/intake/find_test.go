package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/replayer/apiclient"
)

// TestEventsFind (issue 34 item 2): an operator finds an event by the
// provider's id alone, by integration/id, by its key and by its INTAKE_IN
// sequence; nothing found says where it looked and exits 1.
func TestEventsFind(t *testing.T) {
	t.Parallel()
	r := startOperatorRig(t)
	r.publish("evt_1", "evt_2")
	var seq int64
	if err := r.db.QueryRow(context.Background(), `SELECT stream_seq FROM intake.inbox WHERE event_id = 'evt_2'`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"evt_2", "demo/evt_2", "demo/main/evt_2", "in:" + itoa(seq), itoa(seq)} {
		out, errOut, code := r.cli("", cliViewer, "events", "find", q)
		if code != 0 || !strings.Contains(out, "demo/main/evt_2") || strings.Contains(out, "evt_1") || !strings.Contains(out, "processed") {
			t.Errorf("find %s: exit %d\n%s%s", q, code, out, errOut)
		}
	}
	out, _, code := r.cli("", cliViewer, "events", "find", "evt_1", "-o", "json")
	var res apiclient.FindResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Matches) != 1 || res.Matches[0].How != "event_id" ||
		res.Matches[0].Event == nil || res.Matches[0].Event.Status != "processed" {
		t.Fatalf("find -o json: exit %d\n%s", code, out)
	}
	// A second message under evt_1's key (another payload: a conflict) is
	// found by its own sequence, through the key it carries.
	msg := envelope.NewDelivery(envelope.Key{Integration: "demo", Account: "main", EventID: "evt_1"}, "acme", "invoice.paid",
		[]byte(`{"id":"evt_1","type":"invoice.paid","tampered":true}`), time.Now()).Msg()
	ack, err := r.js.PublishMsg(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return r.count(`SELECT count(*) FROM intake.conflicts`) == 1 }, "no conflict recorded")
	out, errOut, code := r.cli("", cliViewer, "events", "find", "seq:"+strconv.FormatUint(ack.Sequence, 10))
	if code != 0 || !strings.Contains(out, "demo/main/evt_1") || !strings.Contains(out, "stream_seq") {
		t.Fatalf("find the conflicting message's sequence: exit %d\n%s%s", code, out, errOut)
	}

	// conflicts show: the field that differs, by path (issue 34 items 5, 9).
	out, errOut, code = r.cli("", cliViewer, "conflicts", "show", "demo/main/evt_1")
	if code != 0 || !strings.Contains(out, "$.tampered") || !strings.Contains(out, "add") || strings.Contains(out, "$.id") {
		t.Fatalf("conflicts show: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := r.cli("", cliViewer, "conflicts", "show", "demo/main/evt_2"); code != codeError || !strings.Contains(errOut, "has no conflict") {
		t.Errorf("conflicts show without a conflict: exit %d\n%s", code, errOut)
	}

	_, errOut, code = r.cli("", cliViewer, "events", "find", "evt_nope")
	if code != codeError || !strings.Contains(errOut, `nothing found for "evt_nope"`) || !strings.Contains(errOut, "in integration demo") {
		t.Fatalf("find nothing: exit %d, want %d and where it looked:\n%s", code, codeError, errOut)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestEventsSearch (issue 34 item 2): payloads searched by a JSON field's
// value over a bounded window — operators only by default.
func TestEventsSearch(t *testing.T) {
	t.Parallel()
	r := startOperatorRig(t)
	r.publish("evt_1", "evt_2", "evt_3")
	out, errOut, code := r.cli("", cliOperator, "events", "search", "--path", "id", "--value", "evt_2", "--since", "1h")
	if code != 0 || !strings.Contains(out, "demo/main/evt_2") || strings.Contains(out, "evt_3") || !strings.Contains(errOut, "read 3 messages") {
		t.Fatalf("search: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := r.cli("", cliViewer, "events", "search", "--path", "id", "--value", "evt_2"); code != codeRefused ||
		!strings.Contains(errOut, "403") || !strings.Contains(errOut, "api.payload_search.viewers") {
		t.Errorf("viewer search: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := r.cli("", cliOperator, "events", "search", "--path", "id", "--value", "evt_9"); code != codeError ||
		!strings.Contains(errOut, "read 3 messages") {
		t.Errorf("search nothing: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := r.cli("", cliOperator, "events", "search", "--path", "id", "--value", "x", "--since", "3d"); code != codeRefused ||
		!strings.Contains(errOut, "api.payload_search.max_window") {
		t.Errorf("a 3-day window: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := r.cli("", cliOperator, "events", "search", "--path", "a..b", "--value", "x"); code != codeRefused ||
		!strings.Contains(errOut, "segment 2 is empty") {
		t.Errorf("a bad path: exit %d\n%s", code, errOut)
	}
}
