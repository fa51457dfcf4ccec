// Package examples_test runs the example HTTP receivers (receiver-go,
// receiver-node, receiver-python) as processes, each with its own database
// holding the subscriber kit's table, and delivers to them with Intake's
// dispatcher (sender_test.go). Some ids are listed in the receiver's
// KILL_AFTER_COMMIT: it commits their change and dies before answering; a
// supervisor here restarts it, the dispatcher retries with the same
// webhook-id, and the receiver finds its claim. Every event must be one
// change: none twice, none lost.
package examples_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/subscriber"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestGoReceiver: examples/receiver-go, built once.
func TestGoReceiver(t *testing.T) {
	t.Parallel()
	bin := testenv.GoBuild(t, "github.com/intakehq/intake/examples/receiver-go")
	testReceiver(t, func() *exec.Cmd { return exec.Command(bin) })
}

// TestNodeReceiver: examples/receiver-node, installed with npm ci from its
// package-lock.json; skipped without node or npm.
func TestNodeReceiver(t *testing.T) {
	t.Parallel()
	dir := nodeReceiver(t)
	testReceiver(t, func() *exec.Cmd {
		cmd := exec.Command("node", "index.js")
		cmd.Dir = dir
		return cmd
	})
}

// TestPythonReceiver: examples/receiver-python with a python3 that has
// psycopg 3 (Debian's python3-psycopg); skipped without one, except under
// CI=true, where .ci/run installs it and its absence fails the test.
func TestPythonReceiver(t *testing.T) {
	t.Parallel()
	py := pythonWithPsycopg(t)
	script, err := filepath.Abs(filepath.Join("receiver-python", "receiver.py"))
	if err != nil {
		t.Fatal(err)
	}
	testReceiver(t, func() *exec.Cmd { return exec.Command(py, script) })
}

// testReceiver runs the contract's cases against the receiver that command starts.
func testReceiver(t *testing.T, command func() *exec.Cmd) {
	t.Helper()
	dbURL, pool := database(t)
	oldSecret, newSecret, stranger := newSecret(t), newSecret(t), newSecret(t)
	const n = 20
	events := make([]event, n)
	for i := range events {
		events[i] = newEvent(i)
	}
	events[5].Body = []byte("amount=5&currency=eur") // not JSON: sent without Content-Type, stored as NULL
	kill := []string{events[3].WebhookID, events[11].WebhookID, events[17].WebhookID}
	r := startReceiver(t, command, kill, "DATABASE_URL="+dbURL, "WEBHOOK_SECRET="+oldSecret+" "+newSecret, "RECEIVER_NAME="+receiverName)
	client := newClient(t)
	ctx, cancel := context.WithTimeout(r.ctx, 3*time.Minute)
	defer cancel()
	up := func(t *testing.T) { // a receiver that failed (startReceiver) fails what follows once
		t.Helper()
		if err := context.Cause(ctx); err != nil {
			t.Fatalf("receiver down: %v", err)
		}
	}

	t.Run("killed_after_commit_applies_once", func(t *testing.T) {
		got := dispatch(t, ctx, r.url, []string{newSecret}, events)
		for _, ev := range events {
			as := got[ev.WebhookID]
			last := as[len(as)-1]
			killed := slices.Contains(kill, ev.WebhookID)
			if last.Outcome != store.DispatchDelivered {
				t.Errorf("%s: %s at attempt %d (%d %s), want delivered", ev.WebhookID, last.Outcome, last.Attempt, last.StatusCode, last.ErrorClass)
			}
			if killed && (len(as) < 2 || last.StatusCode != http.StatusOK) {
				t.Errorf("%s (its receiver killed after the commit): %d at attempt %d, want the dispatcher's retry answered 200 (claimed before)", ev.WebhookID, last.StatusCode, last.Attempt)
			}
			// Deliveries go in parallel: one in flight when another's kill
			// hook fired lost its answer after its commit too, and its retry
			// finds the claim.
			cut := slices.ContainsFunc(as[:len(as)-1], func(a store.DispatchAttempt) bool { return a.StatusCode == 0 })
			if !killed && last.StatusCode != http.StatusNoContent && (last.StatusCode != http.StatusOK || !cut) {
				t.Errorf("%s: %d at attempt %d, want 204 (applied), or 200 after an attempt that lost its answer", ev.WebhookID, last.StatusCode, last.Attempt)
			}
		}
		// Once per listed id at most (the supervisor fails a second firing):
		// an id whose commit a kill of another cut short finds its claim on
		// the retry and does not fire.
		if got := r.deaths.Load(); got < 1 || got > int32(len(kill)) {
			t.Errorf("receiver killed %d times, want between 1 and %d: its fault hook fires once per listed id at most", got, len(kill))
		}
		// A dispatcher that timed out on a 2xx delivers again: nothing changes.
		for _, ev := range events[:3] {
			if status, err := deliver(ctx, client, r.url, []string{newSecret}, ev, 2); err != nil || status != http.StatusOK {
				t.Errorf("%s delivered again: %d (%v), want 200", ev.WebhookID, status, err)
			}
		}
		for _, ev := range events {
			if changes, claims := applied(t, pool, ev); changes != 1 || claims != 1 {
				t.Errorf("%s: %d changes and %d claims, want 1 of each", ev.WebhookID, changes, claims)
			}
		}
	})

	t.Run("refused_writes_nothing", func(t *testing.T) {
		up(t)
		ev, other := newEvent(100), newEvent(101)
		good := []string{newSecret}
		for _, c := range []struct {
			name    string
			secrets []string
			skew    time.Duration // of webhook-timestamp from now
			tamper  func(*http.Request)
		}{
			{name: "signed with an unknown secret", secrets: []string{stranger}},
			{name: "body changed after signing", secrets: good, tamper: func(r *http.Request) {
				body := []byte(`{"id":"evt_100","type":"invoice.paid","amount":1000000}`)
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			}},
			{name: "signature of another webhook-id", secrets: good, tamper: func(r *http.Request) { r.Header.Set("webhook-id", other.WebhookID) }},
			{name: "no signature", secrets: good, tamper: func(r *http.Request) { r.Header.Del("webhook-signature") }},
			{name: "signature in an unknown version", secrets: good, tamper: func(r *http.Request) {
				r.Header.Set("webhook-signature", strings.Replace(r.Header.Get("webhook-signature"), "v1,", "v2,", 1))
			}},
			{name: "timestamp 6 minutes old", secrets: good, skew: -6 * time.Minute},
			{name: "timestamp 6 minutes ahead", secrets: good, skew: 6 * time.Minute},
		} {
			req, err := newDelivery(ctx, r.url, c.secrets, ev, 1, time.Now().Add(c.skew))
			if err != nil {
				t.Fatal(err)
			}
			if c.tamper != nil {
				c.tamper(req)
			}
			if status, err := send(client, req); err != nil || status != http.StatusUnauthorized {
				t.Errorf("%s: %d (%v), want 401", c.name, status, err)
			}
		}
		for _, e := range []event{ev, other} {
			if changes, claims := applied(t, pool, e); changes != 0 || claims != 0 {
				t.Errorf("%s: %d changes and %d claims after refused requests, want none", e.WebhookID, changes, claims)
			}
		}
		// The refusals left no claim behind: the event signed right is applied.
		if status, err := deliver(ctx, client, r.url, good, ev, 2); err != nil || status != http.StatusNoContent {
			t.Errorf("%s signed right after the refusals: %d (%v), want 204", ev.WebhookID, status, err)
		}
	})

	t.Run("any_configured_secret_verifies", func(t *testing.T) {
		up(t)
		// While rotating, the receiver holds both secrets and the
		// dispatcher signs with each of its own, any one of which may match.
		for i, secrets := range [][]string{{oldSecret}, {stranger, oldSecret}, {newSecret, stranger}} {
			ev := newEvent(200 + i)
			if status, err := deliver(ctx, client, r.url, secrets, ev, 1); err != nil || status != http.StatusNoContent {
				t.Errorf("signed with secrets %d: %d (%v), want 204", i, status, err)
			}
			if changes, claims := applied(t, pool, ev); changes != 1 || claims != 1 {
				t.Errorf("signed with secrets %d: %d changes and %d claims, want 1 of each", i, changes, claims)
			}
		}
	})
}

// receiverName is the receivers' RECEIVER_NAME, their claims' consumer.
const receiverName = "test-receiver"

// eventsTable is the receivers' business table. No unique constraint: a
// change made twice shows as a second row instead of being refused.
const eventsTable = `CREATE SCHEMA example_receiver;
CREATE TABLE example_receiver.events (webhook_id text, key text, event_type text, body jsonb, received_at timestamptz DEFAULT now())`

// database is a fresh database with the subscriber kit's schema and the
// receivers' table.
func database(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	dbURL := testenv.Postgres(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, sql := range []string{subscriber.Schema, eventsTable} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	return dbURL, pool
}

// applied counts ev's business rows (those whose key, type and body are
// not ev's count as well, and fail the test) and its claims.
func applied(t *testing.T, pool *pgxpool.Pool, ev event) (changes, claims int) {
	t.Helper()
	ctx := context.Background()
	var body *string // as the receivers store it: NULL when not JSON
	if json.Valid(ev.Body) {
		s := string(ev.Body)
		body = &s
	}
	var wrong int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE key IS DISTINCT FROM $2 OR event_type IS DISTINCT FROM $3 OR body IS DISTINCT FROM $4::jsonb)
FROM example_receiver.events WHERE webhook_id = $1`, ev.WebhookID, ev.Key, ev.EventType, body).Scan(&changes, &wrong); err != nil {
		t.Fatal(err)
	}
	if wrong > 0 {
		t.Errorf("%s: %d rows without its key %q, type %q or body %s", ev.WebhookID, wrong, ev.Key, ev.EventType, ev.Body)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM intake_subscriber.handled WHERE consumer = $1 AND key = $2 AND execution_id = $3`,
		receiverName, ev.WebhookID, ev.ExecutionID).Scan(&claims); err != nil {
		t.Fatal(err)
	}
	return changes, claims
}

func newEvent(i int) event {
	k := envelope.Key{Integration: "demo", Account: "main", EventID: fmt.Sprintf("evt_%d", i)}
	return event{
		WebhookID: uuid.NewString(), Key: k.String(), Integration: k.Integration, Tenant: "acme", Account: k.Account,
		EventID: k.EventID, EventType: "invoice.paid", ExecutionID: uuid.NewString(), Destination: "example",
		Body: fmt.Appendf(nil, `{"id":%q,"type":"invoice.paid","amount":%d}`, k.EventID, i),
	}
}

func newSecret(t *testing.T) string {
	t.Helper()
	key := make([]byte, 24)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// newClient is the sender's HTTP client, its idle connections closed when
// the test ends.
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// receiver is a receiver process under a supervisor that restarts it, on
// the same address, each time its fault hook kills it.
type receiver struct {
	url    string
	out    testenv.Buffer // every run's output
	deaths atomic.Int32   // runs killed by the fault hook
	// ctx is cancelled, with the cause, when the receiver fails any other
	// way (or the test ends): deliveries stop waiting for it.
	ctx context.Context
}

// startReceiver runs command with env, LISTEN and KILL_AFTER_COMMIT (the
// ids in kill) set, once it listens. The fault hook must kill it once per
// listed id at most: the retry finds the claim and must not fire it again.
func startReceiver(t *testing.T, command func() *exec.Cmd, kill []string, env ...string) *receiver {
	t.Helper()
	r := &receiver{}
	env = append(env, "KILL_AFTER_COMMIT="+strings.Join(kill, ","))
	ctx, fail := context.WithCancelCause(context.Background())
	r.ctx = ctx
	var (
		addr   string
		cmd    *exec.Cmd
		exited <-chan error
		err    error
	)
	for try := 1; ; try++ {
		addr = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		if cmd, exited, err = r.run(command, addr, env); err == nil {
			break
		}
		if try == 3 {
			t.Fatalf("%v\n%s", err, r.out.String())
		}
		t.Logf("%v; once more on another port (taken since it was picked?)", err)
	}
	r.url = "http://" + addr + "/webhooks/intake"
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				_ = cmd.Process.Kill()
				<-exited
				return
			case <-exited:
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					fail(fmt.Errorf("receiver exited (%v), not killed by its fault hook", cmd.ProcessState))
					return
				}
				if r.deaths.Add(1) > int32(len(kill)) {
					fail(fmt.Errorf("receiver killed %d times by its fault hook, %d ids listed: it fired again on a retry", r.deaths.Load(), len(kill)))
					return
				}
				if cmd, exited, err = r.run(command, addr, env); err != nil {
					fail(fmt.Errorf("restart: %w", err))
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		if err := context.Cause(ctx); err != nil {
			t.Errorf("receiver: %v", err)
		}
		fail(context.Canceled)
		if t.Failed() {
			t.Logf("receiver output:\n%s", r.out.String())
		}
	})
	return r
}

// run starts one run of the receiver on addr and returns when it says it
// listens; exited then gets the run's end.
func (r *receiver) run(command func() *exec.Cmd, addr string, env []string) (*exec.Cmd, <-chan error, error) {
	const ready = "listening on"
	before := strings.Count(r.out.String(), ready)
	cmd := command()
	cmd.Env = append(append(os.Environ(), env...), "LISTEN="+addr)
	cmd.Stdout, cmd.Stderr = &r.out, &r.out
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for strings.Count(r.out.String(), ready) == before {
		select {
		case err := <-exited:
			return nil, nil, fmt.Errorf("receiver exited (%v) before listening on %s", err, addr)
		case <-deadline:
			_ = cmd.Process.Kill()
			<-exited
			return nil, nil, fmt.Errorf("receiver not listening on %s after a minute", addr)
		case <-tick.C:
		}
	}
	return cmd, exited, nil
}

// nodeReceiver installs examples/receiver-node (npm ci, from its
// package-lock.json) in a directory of the test's and returns it; it skips
// the test when node or npm is not installed.
func nodeReceiver(t *testing.T) string {
	t.Helper()
	return testenv.NodeExample(t, "receiver-node")
}

// pythonWithPsycopg is a python3 that imports psycopg: Debian's
// /usr/bin/python3 first (python3-psycopg installs there; a python3 first
// on PATH, pyenv's say, may lack it), then the one on PATH.
func pythonWithPsycopg(t *testing.T) string {
	t.Helper()
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, py := range candidates {
		if exec.Command(py, "-c", "import psycopg").Run() == nil {
			return py
		}
	}
	msg := fmt.Sprintf("examples/receiver-python is not tested: no python3 that imports psycopg (tried %v; apt-get install python3-psycopg, as .ci/run does)", candidates)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; under CI=true it must be installed")
	}
	t.Skip(msg)
	return ""
}
