package chaos

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intakehq/intake/processor"
)

// ProcessorCommand is the hidden `intake bench` subcommand the harness starts
// as its processors: the production processor with Effects (or its negative
// control) and the crash switch of CrashAfterCommitOnSignal.
const ProcessorCommand = "chaos-processor"

// EffectsDDL creates the business table of the harness's domain handler.
// key is deliberately NOT unique: a second effect for one event must show
// up as a second row for the verdict to count, not be refused by a
// constraint (which would only turn the bug into a retry loop).
const EffectsDDL = `
CREATE SCHEMA IF NOT EXISTS chaos;
CREATE TABLE IF NOT EXISTS chaos.effects (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key            text        NOT NULL,
    payload_sha256 text        NOT NULL,
    object_id      text,
    object_version bigint,
    execution_id   text        NOT NULL,
    pid            integer     NOT NULL,
    applied_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);`

// Options.Handler's values.
const (
	HandlerGo  = "go"
	HandlerSQL = "sql"
)

// EffectsSQL is Effects as a SQL handler (Options.Handler HandlerSQL): the
// same row, written by a statement the run's config lists under handlers:
// and the stock processor runs in the inbox transaction (forward: true, as
// Effects forwards). Postgres computes the payload's digest from :raw; pid
// is the backend's, the processor's own being out of SQL's reach (the
// verdict reads neither).
const EffectsSQL = `handlers:
  - name: chaos-effects
    integrations: [` + integration + `]
    sql: >-
      INSERT INTO chaos.effects (key, payload_sha256, object_id, object_version, execution_id, pid)
      VALUES (:key, encode(sha256(:raw), 'hex'), :object_id, :object_version, :execution_id, pg_backend_pid())
    forward: true
`

// Effects is the harness's domain handler, run by `intake bench
// chaos-processor --handler effects`: it writes one row per applied event into
// chaos.effects, in the inbox transaction, then forwards the event to
// INTAKE_OUT like the built-in handler. The table is the verdict's
// independent evidence: it is written by business code, not by Intake's
// bookkeeping, so counting its rows checks the exactly-once claim rather
// than restating it.
func Effects() processor.Handler {
	fwd := processor.Forward()
	pid := os.Getpid()
	return processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		_, err := tx.Exec(ctx, `INSERT INTO chaos.effects (key, payload_sha256, object_id, object_version, execution_id, pid)
			VALUES ($1, $2, $3, $4, $5, $6)`, ev.Key.String(), ev.PayloadSHA256, objectOf(ev), versionOf(ev), ev.ExecutionID, pid)
		if err != nil {
			return nil, fmt.Errorf("chaos effects: %w", err)
		}
		return fwd.Handle(ctx, tx, ev)
	})
}

// EffectsOutsideTx is the harness's negative control (`intake bench chaos
// --control`): the same business row, written on its own connection so it
// commits at once whatever becomes of the inbox transaction — the classic
// mistake of a side effect outside the transaction. Every tenth event then
// fails its first run with a retryable error, as a flaky downstream would;
// its retry writes the row again. A harness that passes this run proves
// nothing, so the control run must fail with duplicate effects.
func EffectsOutsideTx(ctx context.Context, databaseURL string) (processor.Handler, func(), error) {
	db, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("chaos control: %w", err)
	}
	fwd := processor.Forward()
	pid := os.Getpid()
	var failed sync.Map // event ids that failed once in this process
	h := processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		_, err := db.Exec(ctx, `INSERT INTO chaos.effects (key, payload_sha256, object_id, object_version, execution_id, pid)
			VALUES ($1, $2, $3, $4, $5, $6)`, ev.Key.String(), ev.PayloadSHA256, objectOf(ev), versionOf(ev), ev.ExecutionID, pid)
		if err != nil {
			return nil, fmt.Errorf("chaos control: %w", err)
		}
		if crc32.ChecksumIEEE([]byte(ev.Key.EventID))%10 == 0 {
			if _, again := failed.LoadOrStore(ev.Key.EventID, true); !again {
				return nil, errors.New("chaos control: downstream failed after the side effect")
			}
		}
		return fwd.Handle(ctx, tx, ev)
	})
	return h, db.Close, nil
}

// objectOf and versionOf are the event's object columns, NULL without one.
func objectOf(ev *processor.Event) *string {
	if ev.ObjectID == "" {
		return nil
	}
	return &ev.ObjectID
}

func versionOf(ev *processor.Event) *int64 {
	if ev.ObjectID == "" {
		return nil
	}
	return &ev.ObjectVersion
}
