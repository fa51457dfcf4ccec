// Command support-cases is a custom Intake processor for a real domain: a
// partner's "ticket.opened" webhook creates a support case, exactly once,
// and schedules a customer notification.
//
// It shows the two rules of side effects:
//
//  1. Changes in the database go through the inbox transaction (the tx the
//     handler receives): they commit with the inbox claim or not at all.
//  2. Side effects outside the database (an e-mail, a partner API call) are
//     not in that transaction. The handler writes a job with a STABLE
//     operation key derived from the scoped key; the job runner passes it as
//     the idempotency key to the outside service, so a retried job never
//     sends twice.
//
// Run it instead of `intake processor`, with the same config:
//
//	intake migrate --config intake.yaml
//	go run ./examples/support-cases --config intake.yaml
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/processor"
)

const schema = `
CREATE SCHEMA IF NOT EXISTS support;
CREATE TABLE IF NOT EXISTS support.cases (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_key text NOT NULL UNIQUE,   -- the webhook's scoped key
    customer   text NOT NULL,
    subject    text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS support.jobs (
    operation_key text PRIMARY KEY,    -- stable: the idempotency key outside
    kind          text NOT NULL,
    payload       jsonb NOT NULL,
    done_at       timestamptz
);`

// ticket is the partner's payload.
type ticket struct {
	Customer string `json:"customer"`
	Subject  string `json:"subject"`
}

// OpenCase is the domain handler.
func OpenCase(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
	var t ticket
	if err := json.Unmarshal(ev.Body, &t); err != nil || t.Customer == "" {
		// No retry can fix a payload we cannot read: fail it visibly.
		return nil, processor.Permanent(fmt.Errorf("ticket payload: customer missing or not JSON"))
	}
	var caseID int64
	err := tx.QueryRow(ctx, `INSERT INTO support.cases (source_key, customer, subject) VALUES ($1, $2, $3)
		RETURNING id`, ev.Key.String(), t.Customer, t.Subject).Scan(&caseID)
	if err != nil {
		return nil, err // retryable: rolls back the whole event, claim included
	}
	job, _ := json.Marshal(map[string]any{"case_id": caseID, "customer": t.Customer})
	if _, err := tx.Exec(ctx, `INSERT INTO support.jobs (operation_key, kind, payload) VALUES ($1, 'notify', $2)
		ON CONFLICT (operation_key) DO NOTHING`, "notify:"+ev.Key.String(), job); err != nil {
		return nil, err
	}
	out, _ := json.Marshal(map[string]any{"case_id": caseID, "customer": t.Customer, "source": ev.Key.String()})
	return []processor.Message{{
		Subject: envelope.SubjectOut(ev.Tenant, "support", "case.opened"),
		Data:    out,
	}}, nil
}

// runJobs sends notifications. A crash after sending and before marking
// done repeats the send with the same operation key, which the (imaginary)
// mail API deduplicates.
func runJobs(ctx context.Context, db *pgxpool.Pool, log *slog.Logger) {
	for ctx.Err() == nil {
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			var key string
			var payload []byte
			err := tx.QueryRow(ctx, `SELECT operation_key, payload FROM support.jobs WHERE done_at IS NULL
				ORDER BY operation_key LIMIT 1 FOR UPDATE SKIP LOCKED`).Scan(&key, &payload)
			if err != nil {
				return err
			}
			log.Info("notify customer", "idempotency_key", key, "payload_bytes", len(payload)) // never the payload itself
			_, err = tx.Exec(ctx, `UPDATE support.jobs SET done_at = now() WHERE operation_key = $1`, key)
			return err
		})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func main() {
	path := flag.String("config", "", "Intake config file (default: the built-in example, pkg/config/example.yaml)")
	addr := flag.String("http-addr", ":9091", "metrics and health")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	cfg, err := loadConfig(*path)
	if err != nil {
		log.Error("config", "err", err)
		os.Exit(1)
	}
	db, err := pgxpool.New(ctx, cfg.Postgres.URL)
	if err != nil {
		log.Error("postgres", "err", err)
		os.Exit(1)
	}
	defer db.Close()
	if _, err := db.Exec(ctx, schema); err != nil {
		log.Error("schema", "err", err)
		os.Exit(1)
	}
	jobsDone := make(chan struct{})
	go func() {
		defer close(jobsDone)
		runJobs(ctx, db, log)
	}()
	defer func() { stop(); <-jobsDone }()

	h := processor.NewRouter().On("ticket.opened", processor.HandlerFunc(OpenCase))
	if err := intake.Run(ctx, cfg, intake.Options{Roles: intake.Roles{Processor: true}, HTTPAddr: *addr, Handler: h, Log: log}); err != nil {
		log.Error("processor", "err", err)
		os.Exit(1)
	}
}

// loadConfig reads path, or the example built into Intake when it is empty.
func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Parse(config.Example, os.LookupEnv)
	}
	return config.Load(path)
}
