package replayer_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

func TestListEventsFiltersAndPages(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.failing.Store(key("evt_f").String(), true)
	r.start()
	for i := range 5 {
		r.publish(fmt.Sprintf("evt_%d", i))
	}
	r.publish("evt_f")
	r.settled()

	var all []apiclient.Event
	cursor := ""
	for range 10 {
		var page apiclient.EventPage
		r.api(http.MethodGet, "/api/v1/events?limit=2&integration=demo&cursor="+url.QueryEscape(cursor), nil, http.StatusOK, &page)
		all = append(all, page.Events...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(all) != 6 {
		t.Fatalf("paged through %d events, want 6", len(all))
	}
	seen := map[string]bool{}
	for i, ev := range all {
		if seen[ev.Key] {
			t.Fatalf("%s listed twice", ev.Key)
		}
		seen[ev.Key] = true
		if i > 0 && ev.FirstReceivedAt.After(all[i-1].FirstReceivedAt) {
			t.Fatalf("events not newest first at %d", i)
		}
	}

	tests := []struct {
		query string
		want  int
	}{
		{"status=failed", 1},
		{"status=processed", 5},
		{"tenant=acme&event_type=invoice.paid", 6},
		{"tenant=other", 0},
		{"key_prefix=" + url.QueryEscape("demo/main/evt_f"), 1},
		{"since=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), 0},
		{"until=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), 6},
	}
	for _, tt := range tests {
		var page apiclient.EventPage
		r.api(http.MethodGet, "/api/v1/events?"+tt.query, nil, http.StatusOK, &page)
		if len(page.Events) != tt.want {
			t.Errorf("?%s: %d events, want %d", tt.query, len(page.Events), tt.want)
		}
	}
	for _, q := range []string{"since=yesterday", "limit=-1", "cursor=garbage"} {
		if code, b := r.do(http.MethodGet, "/api/v1/events?"+q, viewerToken, nil); code != http.StatusBadRequest {
			t.Errorf("?%s = %d %s, want 400", q, code, b)
		}
	}
	// A filter naming a value that cannot exist is refused, naming those
	// that can, rather than answered with an empty page.
	for _, c := range []struct{ path, want string }{
		{"/api/v1/events?integration=dmeo", `integration: unknown \"dmeo\"; one of: demo`},
		{"/api/v1/events?status=procesed", `status: unknown \"procesed\"; one of: processed, stale, failed, quarantined`},
		{"/api/v1/conflicts?integration=dmeo", `one of: demo`},
		{"/api/v1/rejections?reason=bad_sig", `reason: unknown \"bad_sig\"; one of: unknown_integration, tenant_mismatch`},
	} {
		if code, b := r.do(http.MethodGet, c.path, viewerToken, nil); code != http.StatusBadRequest || !strings.Contains(string(b), c.want) {
			t.Errorf("%s = %d %s, want 400 saying %s", c.path, code, b, c.want)
		}
	}
	// Rejections of integrations the config lacks are what unknown_integration records.
	var rej apiclient.RejectionPage
	r.api(http.MethodGet, "/api/v1/rejections?integration=gone&reason=unknown_integration", nil, http.StatusOK, &rej)
}

func TestConflictsAndEventDetail(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	r.publish("evt_c")
	r.settled()
	tampered := envelope.NewDelivery(key("evt_c"), "acme", "invoice.paid", []byte(`{"id":"evt_c","tampered":true}`), time.Now()).Msg()
	ack, err := r.js.PublishMsg(context.Background(), tampered)
	if err != nil {
		t.Fatal(err)
	}
	r.settled()

	var page apiclient.ConflictPage
	r.api(http.MethodGet, "/api/v1/conflicts?integration=demo", nil, http.StatusOK, &page)
	if len(page.Conflicts) != 1 {
		t.Fatalf("conflicts = %+v", page)
	}
	c := page.Conflicts[0]
	if c.Key != "demo/main/evt_c" || c.OriginalSHA256 != envelope.PayloadSHA256(body("evt_c")) ||
		c.ConflictingSHA256 != envelope.PayloadSHA256(tampered.Data) || c.OriginalStreamSeq != 1 ||
		c.ConflictingStreamSeq != int64(ack.Sequence) || c.DetectedAt.IsZero() {
		t.Fatalf("conflict = %+v", c)
	}
	var none apiclient.ConflictPage
	r.api(http.MethodGet, "/api/v1/conflicts?tenant=other", nil, http.StatusOK, &none)
	if len(none.Conflicts) != 0 {
		t.Fatalf("tenant filter: %+v", none)
	}

	var ev apiclient.EventDetail
	r.api(http.MethodGet, "/api/v1/events/demo/evt_c", nil, http.StatusOK, &ev)
	if ev.Conflicts != 1 || len(ev.ConflictRecords) != 1 || ev.ConflictRecords[0].ID != c.ID ||
		len(ev.Executions) != 1 || ev.Executions[0].Mode != "original" || ev.Replays == nil || ev.Deliveries == nil {
		t.Fatalf("event detail = %+v", ev)
	}
	// A dry run selects nothing, so it does not show on the event; a replay does.
	r.api(http.MethodPost, "/api/v1/replays", map[string]any{"selector": sel("keys", keysOf("evt_c"))}, http.StatusOK, nil)
	rep := r.replay(map[string]any{"selector": sel("keys", keysOf("evt_c"))})
	r.api(http.MethodGet, "/api/v1/events/demo/evt_c?account=main", nil, http.StatusOK, &ev)
	if len(ev.Replays) != 1 || ev.Replays[0].ID != rep.ID || ev.Replays[0].PublishedSeq == nil {
		t.Fatalf("replays of the event = %+v", ev.Replays)
	}
}

func TestRedeliveryRepublishesProcessedMessages(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.start()
	r.publish("evt_1", "evt_2", "evt_3")
	r.settled()
	originals := r.copies(envelope.StreamOut, replayer.HeaderRedeliveryID, "")
	if len(originals) != 3 {
		t.Fatalf("INTAKE_OUT holds %d processed messages, want 3", len(originals))
	}
	before := r.streamLastSeq(envelope.StreamOut)

	var dry apiclient.Replay
	req := map[string]any{"selector": sel("stream_seq", map[string]any{"from": 1}), "reason": "billing restored a backup"}
	r.api(http.MethodPost, "/api/v1/redeliveries", req, http.StatusOK, &dry)
	if dry.Matched != 3 || dry.Outcomes[replayer.WouldRedeliver] != 3 || r.streamLastSeq(envelope.StreamOut) != before {
		t.Fatalf("dry run = %+v, INTAKE_OUT %d -> %d", dry, before, r.streamLastSeq(envelope.StreamOut))
	}

	req["dry_run"] = false
	var rep apiclient.Replay
	r.api(http.MethodPost, "/api/v1/redeliveries", req, http.StatusAccepted, &rep)
	rep = r.waitReplay(rep.ID, store.ReplayDone)
	if rep.Published != 3 || rep.Mode != "redeliver" {
		t.Fatalf("redelivery = %+v", rep)
	}
	copies := r.copies(envelope.StreamOut, replayer.HeaderRedeliveryID, rep.ID)
	if len(copies) != 3 {
		t.Fatalf("%d redelivered copies, want 3", len(copies))
	}
	ctx := context.Background()
	out, err := r.js.Stream(ctx, envelope.StreamOut)
	if err != nil {
		t.Fatal(err)
	}
	for id, seqs := range copies {
		m, err := out.GetMsg(ctx, seqs[0])
		if err != nil {
			t.Fatal(err)
		}
		orig := m.Header.Get(replayer.HeaderOriginalMsgID)
		if _, ok := originals[orig]; !ok || id != "redeliver:"+rep.ID+":"+orig || m.Header.Get(envelope.HeaderKey) == "" ||
			m.Header.Get(envelope.HeaderExecutionID) == "" {
			t.Fatalf("copy %s: original id %q, headers %v", id, orig, m.Header)
		}
	}

	// Again, inside the duplicate window: a new redelivery is not swallowed,
	// and the copies of the first are not selected again.
	var again apiclient.Replay
	r.api(http.MethodPost, "/api/v1/redeliveries", req, http.StatusAccepted, &again)
	again = r.waitReplay(again.ID, store.ReplayDone)
	if again.Matched != 3 || again.Published != 3 {
		t.Fatalf("second redelivery = %+v", again)
	}

	// From the outbox, by key.
	var fromOutbox apiclient.Replay
	r.api(http.MethodPost, "/api/v1/redeliveries", map[string]any{"source": "outbox", "selector": sel("keys", keysOf("evt_2")),
		"dry_run": false}, http.StatusAccepted, &fromOutbox)
	fromOutbox = r.waitReplay(fromOutbox.ID, store.ReplayDone)
	oc := r.copies(envelope.StreamOut, replayer.HeaderRedeliveryID, fromOutbox.ID)
	if fromOutbox.Published != 1 || len(oc) != 1 {
		t.Fatalf("outbox redelivery = %+v, copies %v", fromOutbox, oc)
	}
	// The outbox row's msg id is the original message id on INTAKE_OUT,
	// and the copy carries the original's headers — those the row does not
	// store (the key's, the payload hash) put back.
	for id, seqs := range oc {
		origSeqs, ok := originals[id[len("redeliver:"+fromOutbox.ID+":"):]]
		if !ok {
			t.Fatalf("outbox copy %s does not name an original message", id)
		}
		cp, err := out.GetMsg(ctx, seqs[0])
		if err != nil {
			t.Fatal(err)
		}
		orig, err := out.GetMsg(ctx, origSeqs[0])
		if err != nil {
			t.Fatal(err)
		}
		for h, vs := range orig.Header {
			if h != envelope.HeaderMsgID && !slices.Equal(cp.Header.Values(h), vs) {
				t.Errorf("outbox copy's %s = %v; the original's %v", h, cp.Header.Values(h), vs)
			}
		}
	}
}
