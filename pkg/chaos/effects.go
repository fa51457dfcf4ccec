package chaos

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/processor"
)

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

// Effects is the harness's domain handler, run by `intake processor
// --handler effects`: it writes one row per applied event into
// chaos.effects, in the inbox transaction, then forwards the event to
// INTAKE_OUT like the built-in handler. The table is the verdict's
// independent evidence: it is written by business code, not by Intake's
// bookkeeping, so counting its rows checks the exactly-once claim rather
// than restating it.
func Effects() processor.Handler {
	fwd := processor.Forward()
	pid := os.Getpid()
	return processor.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
		var objID *string
		var objVer *int64
		if ev.ObjectID != "" {
			objID, objVer = &ev.ObjectID, &ev.ObjectVersion
		}
		_, err := tx.Exec(ctx, `INSERT INTO chaos.effects (key, payload_sha256, object_id, object_version, execution_id, pid)
			VALUES ($1, $2, $3, $4, $5, $6)`, ev.Key.String(), ev.PayloadSHA256, objID, objVer, ev.ExecutionID, pid)
		if err != nil {
			return nil, fmt.Errorf("chaos effects: %w", err)
		}
		return fwd.Handle(ctx, tx, ev)
	})
}
