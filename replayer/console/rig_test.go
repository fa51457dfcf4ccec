package console_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/processor"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	viewerToken   = "viewer-token-0123456789"
	operatorToken = "operator-token-0123456789"
	// deployToken is configured by its digest (token_sha256), as the chart
	// advises: the digest sits in a ConfigMap anyone with `view` reads.
	deployToken  = "deploy-token-0123456789abcdef"
	deployDigest = "bc06912090e46a7c50f2c89496397ca2f57914f25af4b6422ea92a5af4130bf9" // printf %s "$deployToken" | sha256sum
)

const testConfig = `
nats: {publish_timeout: 2s, stream: {duplicate_window: 2m}}
processor: {ack_wait: 2s, concurrency: 2, max_deliver: 2}
outbox: {poll_interval: 200ms}
api:
  redrive_interval: -1s
  tokens:
    - {name: viewer, token: ` + viewerToken + `, role: viewer}
    - {name: ops, token: ` + operatorToken + `, role: operator}
    - {name: deploy, token_sha256: ` + deployDigest + `, role: operator}
integrations:
  - name: demo
    provider: standard
    tenant: acme
    account: main
    secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
`

// rig is the shared testrig running the processor and the replayer (API
// and console), with a handler that fails for the keys in failing.
type rig struct {
	t       *testing.T
	tr      *testrig.Rig
	base    string
	failing sync.Map
	// transient holds keys whose handler fails with a plain error: retried
	// on processor.backoff.
	transient sync.Map
}

func setup(t *testing.T) *rig {
	t.Helper()
	return setupConfig(t, testConfig)
}

// setupConfig is setup on another config.
func setupConfig(t *testing.T, cfg string) *rig {
	t.Helper()
	r := &rig{t: t}
	r.tr = testrig.New(t, testrig.Options{Config: cfg})
	fwd := processor.Forward()
	h := processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		if _, bad := r.failing.Load(ev.Key.String()); bad {
			return nil, processor.Permanent(errors.New("bug: cannot handle this event"))
		}
		if _, flaky := r.transient.Load(ev.Key.String()); flaky {
			return nil, errors.New("billing API answered 503")
		}
		return fwd.Handle(ctx, tx, ev)
	})
	a := testrig.StartApp(t, r.tr.Config, intake.Options{Roles: intake.Roles{Processor: true, Replayer: true}, Handler: h})
	r.base = a.URL
	return r
}

func key(id string) envelope.Key {
	return envelope.Key{Integration: "demo", Account: "main", EventID: id}
}

// publish puts a delivery on INTAKE_IN as ingress does.
func (r *rig) publish(id, body string) uint64 {
	r.t.Helper()
	msg := envelope.NewDelivery(key(id), "acme", "invoice.paid", []byte(body), time.Now()).Msg()
	ack, err := r.tr.JS.PublishMsg(context.Background(), msg)
	if err != nil {
		r.t.Fatal(err)
	}
	return ack.Sequence
}

func (r *rig) settled() {
	r.t.Helper()
	r.tr.CaughtUp(r.t, 60*time.Second)
}

// client is a browser without JavaScript: a cookie jar, no redirects
// followed, so tests see every answer.
type client struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func (r *rig) client() *client {
	jar, _ := cookiejar.New(nil)
	// A transport of its own, its idle connections closed when the test
	// ends: none outlives it (goleak).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	r.t.Cleanup(tr.CloseIdleConnections)
	return &client{t: r.t, base: r.base, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *client) do(method, path string, form url.Values, header http.Header) (*http.Response, string) {
	c.t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, string(b)
}

var (
	preRE  = regexp.MustCompile(`name="pre" value="([^"]+)"`)
	csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// signIn signs in with token and returns the session's CSRF token.
func (c *client) signIn(token string) string {
	c.t.Helper()
	_, page := c.do(http.MethodGet, "/ui/signin", nil, nil)
	m := preRE.FindStringSubmatch(page)
	if m == nil {
		c.t.Fatalf("sign-in form without its pre field:\n%s", page)
	}
	resp, body := c.do(http.MethodPost, "/ui/signin", url.Values{"pre": {m[1]}, "token": {token}, "next": {"/ui/events"}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("sign-in = %d, want 303:\n%s", resp.StatusCode, body)
	}
	_, page = c.do(http.MethodGet, "/ui/events", nil, nil)
	m = csrfRE.FindStringSubmatch(page)
	if m == nil {
		c.t.Fatalf("events page without a CSRF field:\n%s", page)
	}
	return m[1]
}

func must(t *testing.T, what string, resp *http.Response, body string, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("%s = %d, want %d:\n%s", what, resp.StatusCode, want, body)
	}
}
