package apiclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/replayer/apiclient"
)

// request is what the fake API saw.
type request struct {
	method, uri, auth, contentType, body string
}

// fakeAPI answers every request with status and body, recording it.
func fakeAPI(t *testing.T, status int, body string) (*httptest.Server, *request) {
	t.Helper()
	var got request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = request{method: r.Method, uri: r.URL.RequestURI(), auth: r.Header.Get("Authorization"),
			contentType: r.Header.Get("Content-Type"), body: string(b)}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func TestRequestsTheClientSends(t *testing.T) {
	since := time.Date(2026, 5, 1, 10, 0, 0, 5, time.UTC)
	no := false
	tests := []struct {
		name string
		call func(c *apiclient.Client) error
		want request
	}{
		{"events, every filter", func(c *apiclient.Client) error {
			_, err := c.Events(context.Background(), apiclient.EventQuery{Integration: "demo", Tenant: "acme", EventType: "invoice.paid",
				Status: "failed", Since: since, Until: since.Add(time.Hour), KeyPrefix: "demo/main/", Limit: 2, Cursor: "c1"})
			return err
		}, request{method: "GET", uri: "/api/v1/events?cursor=c1&event_type=invoice.paid&integration=demo&key_prefix=demo%2Fmain%2F&limit=2" +
			"&since=2026-05-01T10%3A00%3A00.000000005Z&status=failed&tenant=acme&until=2026-05-01T11%3A00%3A00.000000005Z"}},
		{"events, no filter", func(c *apiclient.Client) error {
			_, err := c.Events(context.Background(), apiclient.EventQuery{})
			return err
		}, request{method: "GET", uri: "/api/v1/events"}},
		{"event, the API finds the account", func(c *apiclient.Client) error {
			_, err := c.Event(context.Background(), "demo", "evt/1")
			return err
		}, request{method: "GET", uri: "/api/v1/events/demo/evt%2F1"}},
		{"event in the empty account", func(c *apiclient.Client) error {
			_, err := c.EventInAccount(context.Background(), "partner", "", "ord_1")
			return err
		}, request{method: "GET", uri: "/api/v1/events/partner/ord_1?account="}},
		{"conflicts", func(c *apiclient.Client) error {
			_, err := c.Conflicts(context.Background(), apiclient.ConflictQuery{Tenant: "acme", Limit: 50})
			return err
		}, request{method: "GET", uri: "/api/v1/conflicts?limit=50&tenant=acme"}},
		{"rejections", func(c *apiclient.Client) error {
			_, err := c.Rejections(context.Background(), apiclient.RejectionQuery{Reason: "replayed_body", ReplayID: "r1"})
			return err
		}, request{method: "GET", uri: "/api/v1/rejections?reason=replayed_body&replay_id=r1"}},
		{"replays", func(c *apiclient.Client) error {
			_, err := c.Replays(context.Background(), apiclient.ReplayQuery{Limit: 20})
			return err
		}, request{method: "GET", uri: "/api/v1/replays?limit=20"}},
		{"replay", func(c *apiclient.Client) error {
			_, err := c.Replay(context.Background(), "r1")
			return err
		}, request{method: "GET", uri: "/api/v1/replays/r1"}},
		{"start a replay", func(c *apiclient.Client) error {
			_, err := c.StartReplay(context.Background(), apiclient.ReplayRequest{
				Selector: apiclient.Selector{Keys: []string{"demo/main/evt_1"}}, DryRun: &no, Reason: "lost"})
			return err
		}, request{method: "POST", uri: "/api/v1/replays", contentType: "application/json",
			body: `{"selector":{"keys":["demo/main/evt_1"]},"dry_run":false,"reason":"lost"}`}},
		{"start an admitting replay", func(c *apiclient.Client) error {
			_, err := c.StartReplay(context.Background(), apiclient.ReplayRequest{
				Selector: apiclient.Selector{Keys: []string{"shop/acme.myshopify.com/wh-2"}}, DryRun: &no, Reason: "genuine", AdmitReplayedBodies: true})
			return err
		}, request{method: "POST", uri: "/api/v1/replays", contentType: "application/json",
			body: `{"selector":{"keys":["shop/acme.myshopify.com/wh-2"]},"dry_run":false,"reason":"genuine","admit_replayed_bodies":true}`}},
		{"start a redelivery", func(c *apiclient.Client) error {
			_, err := c.StartRedelivery(context.Background(), apiclient.RedeliveryRequest{Source: apiclient.SourceOutbox,
				Selector: apiclient.RedeliverySelector{StreamSeq: &apiclient.SeqRange{From: 1}}})
			return err
		}, request{method: "POST", uri: "/api/v1/redeliveries", contentType: "application/json",
			body: `{"source":"outbox","selector":{"stream_seq":{"from":1}}}`}},
		{"cancel", func(c *apiclient.Client) error {
			_, err := c.CancelReplay(context.Background(), "r1")
			return err
		}, request{method: "POST", uri: "/api/v1/replays/r1/cancel"}},
		{"reconcile", func(c *apiclient.Client) error {
			_, err := c.Reconcile(context.Background(), apiclient.ReconcileQuery{FromSeq: 1, ToSeq: 10, Integration: "demo"})
			return err
		}, request{method: "GET", uri: "/api/v1/reconcile?from_seq=1&integration=demo&to_seq=10"}},
		{"gaps", func(c *apiclient.Client) error {
			_, err := c.Gaps(context.Background())
			return err
		}, request{method: "GET", uri: "/api/v1/gaps"}},
		{"redrive", func(c *apiclient.Client) error {
			_, err := c.Redrive(context.Background())
			return err
		}, request{method: "GET", uri: "/api/v1/redrive"}},
	}
	for _, tt := range tests {
		srv, got := fakeAPI(t, http.StatusOK, `{}`)
		if err := tt.call(apiclient.New(srv.URL+"/", "tok", nil)); err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		tt.want.auth = "Bearer tok"
		if *got != tt.want {
			t.Errorf("%s: sent %+v, want %+v", tt.name, *got, tt.want)
		}
	}
}

func TestNoTokenSendsNoAuthorization(t *testing.T) {
	srv, got := fakeAPI(t, http.StatusOK, `{"events":[]}`)
	if _, err := apiclient.New(srv.URL, "", nil).Events(context.Background(), apiclient.EventQuery{}); err != nil {
		t.Fatal(err)
	}
	if got.auth != "" {
		t.Errorf("Authorization %q without a token", got.auth)
	}
}

func TestAnswersOutside2xxAreErrors(t *testing.T) {
	tests := []struct {
		status      int
		body        string
		wantMessage string
	}{
		{http.StatusForbidden, `{"error":"role viewer may not do this"}`, "role viewer may not do this"},
		{http.StatusConflict, `{"error":"replay is done, not running","replay":{"id":"r1"}}`, "replay is done, not running"},
		{http.StatusBadGateway, "  upstream down\n", "upstream down"},
	}
	for _, tt := range tests {
		srv, _ := fakeAPI(t, tt.status, tt.body)
		_, err := apiclient.New(srv.URL, "tok", nil).CancelReplay(context.Background(), "r1")
		var ae *apiclient.Error
		if !errors.As(err, &ae) {
			t.Fatalf("%d: error %v is no *apiclient.Error", tt.status, err)
		}
		if ae.Status != tt.status || ae.Message != tt.wantMessage || string(ae.Body) != tt.body || apiclient.StatusCode(err) != tt.status {
			t.Errorf("%d: %+v", tt.status, ae)
		}
		if want := fmt.Sprintf("API answered %d: %s", tt.status, tt.wantMessage); err.Error() != want {
			t.Errorf("%d: message %q, want %q", tt.status, err, want)
		}
	}
	// A refused cancel carries the replay it refused.
	srv, _ := fakeAPI(t, http.StatusConflict, `{"error":"replay is done, not running","replay":{"id":"r1","state":"done"}}`)
	_, err := apiclient.New(srv.URL, "tok", nil).CancelReplay(context.Background(), "r1")
	var ae *apiclient.Error
	var body struct{ Replay apiclient.Replay }
	if !errors.As(err, &ae) || json.Unmarshal(ae.Body, &body) != nil || body.Replay.State != apiclient.ReplayDone {
		t.Errorf("409 body: %v", err)
	}
}

func TestOtherFailuresAreNoAPIError(t *testing.T) {
	srv, _ := fakeAPI(t, http.StatusOK, `not json`)
	_, err := apiclient.New(srv.URL, "tok", nil).Replay(context.Background(), "r1")
	if err == nil || apiclient.StatusCode(err) != 0 || !strings.Contains(err.Error(), "answer is not the expected JSON") {
		t.Errorf("undecodable answer: %v", err)
	}

	srv.Close()
	_, err = apiclient.New(srv.URL, "tok", nil).Replay(context.Background(), "r1")
	var ue *url.Error
	if !errors.As(err, &ue) || apiclient.StatusCode(err) != 0 || !strings.HasPrefix(err.Error(), "GET "+srv.URL+": ") {
		t.Errorf("no server: %v", err)
	}
}

func TestReplayPublishable(t *testing.T) {
	rep := apiclient.Replay{Matched: 5, Outcomes: map[string]int64{"would_retry": 3, apiclient.OutcomeMissing: 2}}
	if n := rep.Publishable(); n != 3 {
		t.Errorf("Publishable = %d, want 3", n)
	}
}
