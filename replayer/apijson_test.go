package replayer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

var updateAPIShape = flag.Bool("update-api-shape", false, "rewrite testdata/api/http/*.txt")

// TestAPIAnswersKeepTheirShape calls every /api/v1 endpoint the CLI reads on
// a running replayer and compares each answer's shape — every field's name,
// order and kind (string, time, number, bool, null, object, array), as
// encoded — with what it was: a type that lost its json tags, or a row
// encoded without its wire type, shows here (testdata/api has the exact
// bytes of each type).
func TestAPIAnswersKeepTheirShape(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.failing.Store(key("evt_f").String(), true)
	r.start()
	r.publish("evt_1", "evt_c", "evt_f", "evt_lost")
	r.settled()
	r.tr.Publish(t, envelope.NewDelivery(key("evt_c"), "acme", "invoice.paid", []byte(`{"id":"evt_c","tampered":true}`), time.Now()).Msg())
	forged := r.copyOf("evt_1")
	forged.Header.Set(envelope.HeaderReplayID, uuid.NewString())
	forged.Header.Set(envelope.HeaderReplayMode, "reexecute")
	forged.Header.Set(envelope.HeaderMsgID, "replay:forged:"+key("evt_1").String())
	r.tr.Publish(t, forged)
	r.settled()

	shapes := map[string]string{}
	call := func(name, method, path string, in any, want int) []byte {
		t.Helper()
		code, b := r.do(method, path, operatorToken, in)
		if code != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, code, b, want)
		}
		shapes[name] = shapeOf(t, b)
		return b
	}
	call("replay_dry_run", http.MethodPost, "/api/v1/replays", map[string]any{"selector": sel("keys", keysOf("evt_c"))}, http.StatusOK)
	var started apiclient.Replay
	b := call("replay_started", http.MethodPost, "/api/v1/replays",
		map[string]any{"selector": sel("keys", keysOf("evt_c")), "dry_run": false, "reason": "shape"}, http.StatusAccepted)
	if err := json.Unmarshal(b, &started); err != nil {
		t.Fatal(err)
	}
	r.waitReplay(started.ID, store.ReplayDone)
	r.settled() // its results settled: one shape, whatever the timing
	call("replay_done", http.MethodGet, "/api/v1/replays/"+started.ID, nil, http.StatusOK)
	call("cancel_conflict", http.MethodPost, "/api/v1/replays/"+started.ID+"/cancel", nil, http.StatusConflict)
	call("redelivery_dry_run", http.MethodPost, "/api/v1/redeliveries", map[string]any{"selector": sel("stream_seq", map[string]any{"from": 1})}, http.StatusOK)
	call("replay_page", http.MethodGet, "/api/v1/replays?dry_runs=include&limit=2", nil, http.StatusOK)
	call("event_page", http.MethodGet, "/api/v1/events?limit=2", nil, http.StatusOK)
	call("event_detail", http.MethodGet, "/api/v1/events/demo/evt_c", nil, http.StatusOK)
	call("event_detail_rejected", http.MethodGet, "/api/v1/events/demo/evt_1?account=main", nil, http.StatusOK)
	call("conflict_page", http.MethodGet, "/api/v1/conflicts", nil, http.StatusOK)
	call("rejection_page", http.MethodGet, "/api/v1/rejections", nil, http.StatusOK)
	if _, err := r.db.Exec(context.Background(), `DELETE FROM intake.inbox WHERE event_id = 'evt_lost'`); err != nil {
		t.Fatal(err)
	}
	call("reconcile", http.MethodGet, "/api/v1/reconcile?from_seq=1", nil, http.StatusOK)
	call("gaps", http.MethodGet, "/api/v1/gaps", nil, http.StatusOK)
	call("redrive", http.MethodGet, "/api/v1/redrive", nil, http.StatusOK)

	for name, got := range shapes {
		golden := filepath.Join("testdata", "api", "http", name+".txt")
		if *updateAPIShape {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (record with -update-api-shape)", err)
		}
		if got != string(want) {
			t.Errorf("%s: the answer's shape changed\ngot:\n%s\nwant (%s):\n%s", name, got, golden, want)
		}
	}
}

// shapeOf lists every value of a JSON document, in the order encoded, as
// "path kind": the values themselves (ids, times, counts) vary by run.
func shapeOf(t *testing.T, b []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out strings.Builder
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				n := 0
				for ; dec.More(); n++ {
					k, err := dec.Token()
					if err != nil {
						return err
					}
					if err := walk(path + "." + k.(string)); err != nil {
						return err
					}
				}
				if n == 0 {
					fmt.Fprintf(&out, "%s {}\n", path)
				}
			case '[':
				n := 0
				for ; dec.More(); n++ {
					if err := walk(fmt.Sprintf("%s[%d]", path, n)); err != nil {
						return err
					}
				}
				if n == 0 {
					fmt.Fprintf(&out, "%s []\n", path)
				}
			}
			_, err := dec.Token() // the closing delimiter
			return err
		case string:
			kind := "string"
			if _, err := time.Parse(time.RFC3339Nano, v); err == nil {
				kind = "time"
			}
			fmt.Fprintf(&out, "%s %s\n", path, kind)
		case json.Number:
			fmt.Fprintf(&out, "%s number\n", path)
		case bool:
			fmt.Fprintf(&out, "%s bool\n", path)
		case nil:
			fmt.Fprintf(&out, "%s null\n", path)
		}
		return nil
	}
	if err := walk(""); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("trailing data after the answer: %s", b)
	}
	return out.String()
}
