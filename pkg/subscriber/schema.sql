-- Intake subscriber inbox: the table a subscriber keeps in its own database
-- so that each processed event changes it once. Print it with
-- `intake subscriber schema`; apply it once (it is idempotent).
--
-- The rule, in any language, for each message from INTAKE_OUT:
--   BEGIN;
--   INSERT INTO intake_subscriber.handled (consumer, key, execution_id)
--     VALUES ($consumer, $intake_key, $intake_execution_id)
--     ON CONFLICT DO NOTHING RETURNING key;
--   -- no row returned: already handled. COMMIT (nothing changed), then ack.
--   -- a row returned: apply the change in this same transaction.
--   COMMIT;
--   ack the message (only after the commit; on an error ROLLBACK and nak).
--
-- consumer is the subscriber's durable consumer name, key the Intake-Key
-- header, execution_id the Intake-Execution-Id header.
--
-- A re-execution (an operator's: new Intake-Execution-Id, same Intake-Key)
-- is applied again only when the subscriber asks for it: such a subscriber
-- claims in handled_executions instead, one row per (consumer, key,
-- execution_id). A consumer uses one table or the other, never both.
CREATE SCHEMA IF NOT EXISTS intake_subscriber;

CREATE TABLE IF NOT EXISTS intake_subscriber.handled (
    consumer     text        NOT NULL,
    key          text        NOT NULL,
    execution_id text        NOT NULL,
    handled_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, key)
);

CREATE TABLE IF NOT EXISTS intake_subscriber.handled_executions (
    consumer     text        NOT NULL,
    key          text        NOT NULL,
    execution_id text        NOT NULL,
    handled_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, key, execution_id)
);
