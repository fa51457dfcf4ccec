package testrig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer"
)

// Client is a typed client of the operator API (/api/v1) for tests; the
// answers are the replayer's own types. Methods return *APIError for an
// answer outside 2xx.
type Client struct {
	Base  string // e.g. http://127.0.0.1:8080
	Token string // bearer token; empty sends none
	HTTP  *http.Client
}

// NewClient is a client of the API at base with token.
func NewClient(base, token string) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), Token: token, HTTP: &http.Client{Timeout: time.Minute}}
}

// APIError is an answer outside 2xx.
type APIError struct {
	Status  int
	Message string // the answer's "error", or its body
	Body    []byte
}

func (e *APIError) Error() string { return fmt.Sprintf("API answered %d: %s", e.Status, e.Message) }

// Status is the HTTP status of an *APIError in err's chain, 0 without one.
func Status(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// Do sends in (if not nil) as JSON, decodes a 2xx answer into out (if not
// nil) and returns the status.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, body)
	if err != nil {
		return 0, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(raw))
		}
		return resp.StatusCode, &APIError{Status: resp.StatusCode, Message: e.Error, Body: raw}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, nil
}

// EventQuery filters GET /api/v1/events; zero fields are left out.
type EventQuery struct {
	Integration, Tenant, EventType, Status, KeyPrefix string
	Since, Until                                      time.Time
	Limit                                             int
	Cursor                                            string
}

func (q EventQuery) values() url.Values {
	v := url.Values{}
	set(v, "integration", q.Integration)
	set(v, "tenant", q.Tenant)
	set(v, "event_type", q.EventType)
	set(v, "status", q.Status)
	set(v, "key_prefix", q.KeyPrefix)
	setTime(v, "since", q.Since)
	setTime(v, "until", q.Until)
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	set(v, "cursor", q.Cursor)
	return v
}

// Events is GET /api/v1/events.
func (c *Client) Events(ctx context.Context, q EventQuery) (replayer.EventPage, error) {
	var page replayer.EventPage
	_, err := c.Do(ctx, http.MethodGet, "/api/v1/events"+encode(q.values()), nil, &page)
	return page, err
}

// Event is GET /api/v1/events/{integration}/{event_id}.
func (c *Client) Event(ctx context.Context, integration, eventID string) (replayer.EventDetail, error) {
	var d replayer.EventDetail
	_, err := c.Do(ctx, http.MethodGet, "/api/v1/events/"+url.PathEscape(integration)+"/"+url.PathEscape(eventID), nil, &d)
	return d, err
}

// ConflictQuery filters GET /api/v1/conflicts; zero fields are left out.
type ConflictQuery struct {
	Integration, Tenant, KeyPrefix string
	Since, Until                   time.Time
	Limit                          int
	Cursor                         string
}

// Conflicts is GET /api/v1/conflicts.
func (c *Client) Conflicts(ctx context.Context, q ConflictQuery) (replayer.ConflictPage, error) {
	v := url.Values{}
	set(v, "integration", q.Integration)
	set(v, "tenant", q.Tenant)
	set(v, "key_prefix", q.KeyPrefix)
	setTime(v, "since", q.Since)
	setTime(v, "until", q.Until)
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	set(v, "cursor", q.Cursor)
	var page replayer.ConflictPage
	_, err := c.Do(ctx, http.MethodGet, "/api/v1/conflicts"+encode(v), nil, &page)
	return page, err
}

// Replays is GET /api/v1/replays, the audit log (redeliveries included),
// newest first. limit 0 takes the API's default.
func (c *Client) Replays(ctx context.Context, limit int, cursor string) (replayer.ReplayPage, error) {
	v := url.Values{}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	set(v, "cursor", cursor)
	var page replayer.ReplayPage
	_, err := c.Do(ctx, http.MethodGet, "/api/v1/replays"+encode(v), nil, &page)
	return page, err
}

// Replay is GET /api/v1/replays/{id} (redeliveries too).
func (c *Client) Replay(ctx context.Context, id string) (store.Replay, error) {
	var rep store.Replay
	_, err := c.Do(ctx, http.MethodGet, "/api/v1/replays/"+url.PathEscape(id), nil, &rep)
	return rep, err
}

// StartReplay is POST /api/v1/replays. The answer is a dry run's result, or
// a replay in state running (202) or already done (nothing to publish).
func (c *Client) StartReplay(ctx context.Context, req replayer.ReplayRequest) (store.Replay, error) {
	var rep store.Replay
	_, err := c.Do(ctx, http.MethodPost, "/api/v1/replays", req, &rep)
	return rep, err
}

// CancelReplay is POST /api/v1/replays/{id}/cancel; a replay no longer
// running answers 409.
func (c *Client) CancelReplay(ctx context.Context, id string) (store.Replay, error) {
	var rep store.Replay
	_, err := c.Do(ctx, http.MethodPost, "/api/v1/replays/"+url.PathEscape(id)+"/cancel", nil, &rep)
	return rep, err
}

// StartRedelivery is POST /api/v1/redeliveries.
func (c *Client) StartRedelivery(ctx context.Context, req replayer.RedeliveryRequest) (store.Replay, error) {
	var rep store.Replay
	_, err := c.Do(ctx, http.MethodPost, "/api/v1/redeliveries", req, &rep)
	return rep, err
}

// Reconcile is GET /api/v1/reconcile.
func (c *Client) Reconcile(ctx context.Context, req replayer.ReconcileRequest) (replayer.ReconcileResult, error) {
	v := url.Values{}
	if req.FromSeq > 0 {
		v.Set("from_seq", strconv.FormatUint(req.FromSeq, 10))
	}
	if req.ToSeq > 0 {
		v.Set("to_seq", strconv.FormatUint(req.ToSeq, 10))
	}
	setTime(v, "since", req.Since)
	setTime(v, "until", req.Until)
	set(v, "integration", req.Integration)
	var res replayer.ReconcileResult
	_, err := c.Do(ctx, http.MethodGet, "/api/v1/reconcile"+encode(v), nil, &res)
	return res, err
}

// WaitReplay polls the replay (or redelivery) until it is no longer running
// and returns it; it fails the test after timeout.
func (c *Client) WaitReplay(t testing.TB, id string, timeout time.Duration) store.Replay {
	t.Helper()
	var (
		rep store.Replay
		err error
	)
	testenv.Eventually(t, timeout, func() bool {
		rep, err = c.Replay(context.Background(), id)
		return err == nil && rep.State != store.ReplayRunning
	}, "replay %s never finished", id)
	return rep
}

func set(v url.Values, k, s string) {
	if s != "" {
		v.Set(k, s)
	}
}

func setTime(v url.Values, k string, t time.Time) {
	if !t.IsZero() {
		v.Set(k, t.Format(time.RFC3339Nano))
	}
}

func encode(v url.Values) string {
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}
