package apiclient

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
	"time"
)

// maxAnswer bounds the answer read into memory: a dry run's sample and a
// reconcile's missing list are the large ones, far below it.
const maxAnswer = 64 << 20

// Client calls one replayer's operator API. It is safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New is a client of the API at baseURL (e.g. http://127.0.0.1:8081) that
// sends token as its bearer token (none when empty). hc nil uses
// http.DefaultClient, which has no timeout: dry runs and reconciles of large
// ranges take minutes, so callers choose.
func New(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: hc}
}

// Error is an answer outside 2xx.
type Error struct {
	Status  int    // the HTTP status
	Message string // the answer's "error", or its body when it has none
	Body    []byte // the answer as sent (a refused cancel carries the replay)
}

func (e *Error) Error() string { return fmt.Sprintf("API answered %d: %s", e.Status, e.Message) }

// StatusCode is the HTTP status of the *Error in err's chain, 0 without one.
func StatusCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Do sends in (unless nil) as JSON, decodes a 2xx answer into out (unless
// nil) and returns the status. The typed methods are built on it; call it
// for requests they do not make (raw JSON, deliberately malformed bodies).
// An error from the connection wraps the *url.Error of net/http.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
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
		return resp.StatusCode, &Error{Status: resp.StatusCode, Message: e.Error, Body: raw}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: answer is not the expected JSON: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// get is Do for a GET of path with query q, decoding into out.
func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	_, err := c.Do(ctx, http.MethodGet, path, nil, out)
	return err
}

// query builds a query string, leaving zero values out: the API reads a
// missing parameter as "no filter" or "the default".
type query url.Values

func (q query) str(k, v string) {
	if v != "" {
		q[k] = []string{v}
	}
}

func (q query) int(k string, n int) {
	if n > 0 {
		q[k] = []string{strconv.Itoa(n)}
	}
}

func (q query) uint(k string, n uint64) {
	if n > 0 {
		q[k] = []string{strconv.FormatUint(n, 10)}
	}
}

func (q query) time(k string, t time.Time) {
	if !t.IsZero() {
		q[k] = []string{t.Format(time.RFC3339Nano)}
	}
}
