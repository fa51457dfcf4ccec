package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// Exit codes of the operator commands (replay, redeliver, reconcile, events,
// conflicts). Scripts tell "the API said no" from "it ran but not fully".
const (
	codeError    = 1 // usage, connection, or a declined confirmation
	codeRefused  = 2 // the API answered an error (4xx/5xx)
	codePartial  = 3 // finished, but not everything: events missing from the stream, cancelled; reconcile found missing events
	codeFailed   = 4 // the replay failed
	outputTable  = "table"
	outputJSON   = "json"
	pollInterval = 500 * time.Millisecond
)

// client talks to the replayer's operator API.
type client struct {
	server string
	token  string
	output string
	http   *http.Client
}

// addClientFlags adds --server, --token and -o to cmd; defaults come from
// INTAKE_SERVER and INTAKE_TOKEN.
func addClientFlags(cmd *cobra.Command) *client {
	c := &client{http: &http.Client{Timeout: 5 * time.Minute}} // dry runs of large ranges take a while
	server := os.Getenv("INTAKE_SERVER")
	if server == "" {
		server = defaultAPI
	}
	f := cmd.Flags()
	f.StringVar(&c.server, "server", server, "replayer API base URL (env INTAKE_SERVER)")
	f.StringVar(&c.token, "token", "", "API bearer token (default: env INTAKE_TOKEN)")
	f.StringVarP(&c.output, "output", "o", outputTable, "output: table or json")
	return c
}

func (c *client) check() error {
	if c.token == "" {
		c.token = os.Getenv("INTAKE_TOKEN") // not a flag default: --help would print it
	}
	if c.token == "" {
		return errors.New("no API token: pass --token or set INTAKE_TOKEN")
	}
	if c.output != outputTable && c.output != outputJSON {
		return fmt.Errorf("--output: table or json, got %q", c.output)
	}
	return nil
}

// apiError is an error answer of the API.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("API answered %d: %s", e.status, e.msg) }

// do sends in (if any) as JSON and decodes a 2xx answer into out. It returns
// the status code.
func (c *client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.server, "/")+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w (is the replayer running? --server)", method, c.server, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
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
		return resp.StatusCode, &apiError{status: resp.StatusCode, msg: e.Error}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: answer is not the expected JSON: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// fail prints err and turns it into the exit code it deserves.
func fail(cmd *cobra.Command, err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		fmt.Fprintln(cmd.ErrOrStderr(), "intake:", err)
		return exitError{code: codeRefused}
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// parseWhen reads a time flag: RFC 3339, or a duration meaning that long
// ago ("2h" is two hours before now).
func parseWhen(flag, s string, now time.Time) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return &t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		t := now.Add(-d)
		return &t, nil
	}
	return nil, fmt.Errorf("--%s: an RFC 3339 time or a duration ago (e.g. 2h), got %q", flag, s)
}

func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// isTerminal reports whether w is a character device (progress may then
// rewrite its line).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
