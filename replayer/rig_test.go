package replayer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/processor"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	viewerToken   = "viewer-token-0123456789"
	operatorToken = "operator-token-0123456789"
)

const testConfig = `
nats: {publish_timeout: 2s, stream: {duplicate_window: 2m}}
processor: {ack_wait: 2s, concurrency: 2}
outbox: {poll_interval: 200ms}
api:
  redrive_interval: -1s # tests remove inbox rows behind Intake's back: no pass may repair them meanwhile
  tokens:
    - {name: viewer, token: ` + viewerToken + `, role: viewer}
    - {name: ops, token: ` + operatorToken + `, role: operator}
integrations:
  - name: demo
    provider: standard
    tenant: acme
    account: main
    secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
`

// rig is a real nats-server and a fresh Postgres database with the schema
// and a business table, "effects", that the test handler writes one row to
// per handler run — the independent evidence of business effect. It is the
// shared testrig with this package's helpers.
type rig struct {
	t     *testing.T
	tr    *testrig.Rig
	cfg   *config.Config
	nats  *testenv.NATSServer
	nc    *nats.Conn
	js    jetstream.JetStream
	dbURL string
	store *store.Store
	db    *pgxpool.Pool
	base  string // the app's HTTP base, once started
	app   *testrig.App

	// failing holds keys whose handler fails permanently (the "bug").
	failing sync.Map
}

func setup(t *testing.T) *rig {
	t.Helper()
	return setupWith(t, testrig.Options{Config: testConfig})
}

// setupWith is setup with other rig options, e.g. a private Postgres.
func setupWith(t *testing.T, o testrig.Options) *rig {
	t.Helper()
	tr := testrig.New(t, o)
	if _, err := tr.DB.Exec(context.Background(), `CREATE TABLE effects (key text NOT NULL, execution_id text NOT NULL,
		mode text NOT NULL, replay_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, tr: tr, cfg: tr.Config, nats: tr.Server, nc: tr.Conn, js: tr.JS, dbURL: tr.DBURL, store: tr.Store, db: tr.DB}
}

// handler is the domain handler: one effects row per run, failing for keys
// in r.failing, then the built-in forward to INTAKE_OUT.
func (r *rig) handler() processor.Handler {
	fwd := processor.Forward()
	return processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		if _, bad := r.failing.Load(ev.Key.String()); bad {
			return nil, processor.Permanent(errors.New("bug: cannot handle this event"))
		}
		if _, err := tx.Exec(ctx, `INSERT INTO effects (key, execution_id, mode, replay_id) VALUES ($1, $2, $3, $4)`,
			ev.Key.String(), ev.ExecutionID, ev.Mode, ev.ReplayID); err != nil {
			return nil, err
		}
		return fwd.Handle(ctx, tx, ev)
	})
}

// start runs the app as `intake dev` wires it minus ingress: processor,
// relay and the replayer (API and engine).
func (r *rig) start() {
	r.t.Helper()
	a := testrig.StartApp(r.t, r.cfg, intake.Options{Roles: intake.Roles{Processor: true, Replayer: true}, Handler: r.handler()})
	r.base, r.app = a.URL, a
}

func key(id string) envelope.Key {
	return envelope.Key{Integration: "demo", Account: "main", EventID: id}
}

func body(id string) []byte { return []byte(fmt.Sprintf(`{"id":%q,"type":"invoice.paid"}`, id)) }

// publish puts deliveries on INTAKE_IN as ingress does and returns their
// stream sequences.
func (r *rig) publish(ids ...string) []uint64 {
	r.t.Helper()
	seqs := make([]uint64, len(ids))
	for i, id := range ids {
		msg := envelope.NewDelivery(key(id), "acme", "invoice.paid", body(id), time.Now()).Msg()
		ack, err := r.js.PublishMsg(context.Background(), msg)
		if err != nil {
			r.t.Fatal(err)
		}
		seqs[i] = ack.Sequence
	}
	return seqs
}

func (r *rig) count(q string, args ...any) int {
	r.t.Helper()
	return r.tr.Count(r.t, q, args...)
}

// settled waits until the processor has handled every message in INTAKE_IN
// (nothing pending or unacked) and the outbox is empty.
func (r *rig) settled() {
	r.t.Helper()
	r.tr.CaughtUp(r.t, 60*time.Second)
}

// do calls the API with token (none when empty) and returns the status and
// the body.
func (r *rig) do(method, path, token string, in any) (int, []byte) {
	r.t.Helper()
	var raw json.RawMessage
	code, err := apiclient.New(r.base, token, nil).Do(context.Background(), method, path, in, &raw)
	if ae := (*apiclient.Error)(nil); errors.As(err, &ae) {
		return ae.Status, ae.Body
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return code, raw
}

// api calls the API and decodes the answer into out, failing unless the
// status is want.
func (r *rig) api(method, path string, in any, want int, out any) {
	r.t.Helper()
	code, b := r.do(method, path, operatorToken, in)
	if code != want {
		r.t.Fatalf("%s %s = %d %s, want %d", method, path, code, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			r.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// replay starts a replay (dry_run false) and waits until it is done.
func (r *rig) replay(req map[string]any) apiclient.Replay {
	r.t.Helper()
	req["dry_run"] = false
	var rep apiclient.Replay
	r.api(http.MethodPost, "/api/v1/replays", req, http.StatusAccepted, &rep)
	return r.waitReplay(rep.ID, store.ReplayDone)
}

func (r *rig) waitReplay(id, state string) apiclient.Replay {
	r.t.Helper()
	rep := testrig.WaitReplay(r.t, apiclient.New(r.base, operatorToken, nil), id, 60*time.Second)
	if rep.State != state {
		r.t.Fatalf("replay %s ended %s (error %v), want %s", id, rep.State, rep.Error, state)
	}
	return rep
}

// copies returns the INTAKE_IN (or INTAKE_OUT) messages carrying header h
// with value v, by Nats-Msg-Id.
func (r *rig) copies(streamName, h, v string) map[string][]uint64 {
	r.t.Helper()
	out := map[string][]uint64{}
	for _, m := range r.tr.Messages(r.t, streamName) {
		if m.Header.Get(h) == v {
			id := m.Header.Get(envelope.HeaderMsgID)
			out[id] = append(out[id], m.Sequence)
		}
	}
	return out
}

func (r *rig) streamLastSeq(name string) uint64 {
	r.t.Helper()
	return r.tr.LastSeq(r.t, name)
}

// newReplayer builds a replayer on its own NATS connection, as a separate
// process would have, for kill-and-resume tests; on the rig's store unless
// o has one.
func (r *rig) newReplayer(o replayer.Options) (*replayer.Replayer, *nats.Conn) {
	r.t.Helper()
	nc, err := nats.Connect(r.nats.URL())
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		r.t.Fatal(err)
	}
	if o.Store == nil {
		o.Store = r.store
	}
	o.JS, o.Tokens = js, r.cfg.API.Tokens
	rp, err := replayer.New(o)
	if err != nil {
		r.t.Fatal(err)
	}
	return rp, nc
}

// runReplayer runs rp until the returned stop is called (or the test ends).
func (r *rig) runReplayer(rp *replayer.Replayer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := rp.Run(ctx); err != nil {
			r.t.Errorf("replayer.Run: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	r.t.Cleanup(stop)
	return stop
}

func keysOf(ids ...string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = key(id).String()
	}
	return out
}
