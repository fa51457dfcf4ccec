// Command receiver-go is an HTTP destination of Intake's dispatcher that
// changes its database once per event, however often the dispatcher
// retries. Per request: verify the Standard Webhooks signature over the raw
// body (401, nothing written, when it fails); in one transaction claim the
// webhook-id in the subscriber kit's table (intake subscriber schema) and,
// only if the claim is new, make the change; commit; answer. Killed after
// the commit and before the answer, it gets the same webhook-id again, finds
// the claim and answers 200 without changing anything.
//
//	go run ./cmd/intake subscriber schema | psql "$DATABASE_URL"
//	psql "$DATABASE_URL" -c "CREATE SCHEMA example_receiver; CREATE TABLE example_receiver.events (webhook_id text, key text, event_type text, body jsonb, received_at timestamptz DEFAULT now())"
//	DATABASE_URL=postgres://… WEBHOOK_SECRET=whsec_… go run ./examples/receiver-go
//
// Environment: DATABASE_URL, WEBHOOK_SECRET (the destination's whsec_
// secrets, space-separated while rotating: any one may match), LISTEN
// (default 127.0.0.1:8090), RECEIVER_NAME (the claim's consumer, default
// example-receiver). KILL_AFTER_COMMIT is the tests' fault hook: for these
// comma-separated webhook-ids the process kills itself right after
// committing their change, before answering.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// maxBody is Intake's default body limit (ingress max_body_bytes): no
// processed payload is larger unless an integration raised it.
const maxBody = 1 << 20

const (
	claim = `INSERT INTO intake_subscriber.handled (consumer, key, execution_id) VALUES ($1, $2, $3)
ON CONFLICT DO NOTHING RETURNING key`
	change = `INSERT INTO example_receiver.events (webhook_id, key, event_type, body) VALUES ($1, $2, $3, $4)`
)

type receiver struct {
	pool            *pgxpool.Pool
	name            string
	secrets         []*standardwebhooks.Webhook
	killAfterCommit map[string]bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	rc := &receiver{name: env("RECEIVER_NAME", "example-receiver"), killAfterCommit: map[string]bool{}}
	for _, s := range strings.Fields(os.Getenv("WEBHOOK_SECRET")) {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return fmt.Errorf("WEBHOOK_SECRET: %w", err)
		}
		rc.secrets = append(rc.secrets, wh)
	}
	if len(rc.secrets) == 0 {
		return errors.New("WEBHOOK_SECRET: required (the destination's whsec_… secret)")
	}
	for _, id := range strings.Split(os.Getenv("KILL_AFTER_COMMIT"), ",") {
		if id != "" {
			rc.killAfterCommit[id] = true
		}
	}
	if os.Getenv("DATABASE_URL") == "" {
		return errors.New("DATABASE_URL: required")
	}
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	rc.pool = pool

	ln, err := net.Listen("tcp", env("LISTEN", "127.0.0.1:8090"))
	if err != nil {
		return err
	}
	log.Printf("listening on %s", ln.Addr())
	srv := &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown) // in-flight requests finish (commit and answer) first
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	if err := rc.verify(body, r.Header); err != nil {
		log.Printf("refused: %v", err)
		http.Error(w, "signature", http.StatusUnauthorized)
		return
	}
	id := r.Header.Get("webhook-id")
	claimed, err := rc.apply(r.Context(), id, r.Header, body)
	if err != nil {
		log.Printf("%s: %v", id, err)
		http.Error(w, "not applied", http.StatusInternalServerError)
		return
	}
	if !claimed {
		w.WriteHeader(http.StatusOK) // a retry of a change already committed
		return
	}
	if rc.killAfterCommit[id] {
		log.Printf("%s: committed; killing myself before answering (KILL_AFTER_COMMIT)", id)
		p, _ := os.FindProcess(os.Getpid())
		_ = p.Kill()
		select {}
	}
	w.WriteHeader(http.StatusNoContent)
}

// verify accepts the request if any configured secret signed it, within
// the library's 5 minutes of now.
func (rc *receiver) verify(body []byte, h http.Header) error {
	var err error
	for _, wh := range rc.secrets {
		if err = wh.Verify(body, h); err == nil {
			return nil
		}
	}
	return err
}

// apply claims id and makes the change in one transaction; claimed is
// false when an earlier request committed both.
func (rc *receiver) apply(ctx context.Context, id string, h http.Header, body []byte) (claimed bool, err error) {
	var stored []byte // the body as jsonb, NULL when it is not JSON
	if json.Valid(body) {
		stored = body
	}
	err = pgx.BeginFunc(ctx, rc.pool, func(tx pgx.Tx) error {
		var key string
		err := tx.QueryRow(ctx, claim, rc.name, id, h.Get("Intake-Execution-Id")).Scan(&key)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // claimed before: change nothing
		}
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		claimed = true
		if _, err := tx.Exec(ctx, change, id, h.Get("Intake-Key"), h.Get("Intake-Event-Type"), stored); err != nil {
			return fmt.Errorf("change: %w", err)
		}
		return nil
	})
	return claimed && err == nil, err
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
