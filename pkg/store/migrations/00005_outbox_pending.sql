-- +goose Up
-- Outbox rows become immutable. The relay used to mark each row published
-- with an UPDATE, which rewrote the whole row (payload included) and its
-- indexes: a quarter of Postgres's time while the processor drains. What is
-- not yet published is now the small outbox_pending table, written in the
-- batch transaction. The processor publishes its rows right after commit and
-- deletes their ids; the relay publishes what stays pending longer (a
-- processor that died or lost NATS), claiming it with DELETE … RETURNING.
-- A row is published when its id is no longer pending. No foreign key: it
-- would cost an outbox index probe per row on the hot path; the relay joins
-- and drops a pending id whose row is gone.
CREATE TABLE intake.outbox_pending (
    id         uuid        PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO intake.outbox_pending (id, created_at)
    SELECT id, created_at FROM intake.outbox WHERE published_at IS NULL;
DROP INDEX intake.outbox_pending_idx;
ALTER TABLE intake.outbox DROP COLUMN published_at;
COMMENT ON COLUMN intake.outbox.attempts IS 'failed publish attempts';
-- Retention deletes published rows by age.
CREATE INDEX outbox_created_idx ON intake.outbox (created_at);
-- The relay polls instead of waiting for a NOTIFY: the processor publishes
-- its own rows, and NOTIFY's commit-time queue lock serialised every batch
-- commit.
DROP TRIGGER outbox_notify ON intake.outbox;
DROP FUNCTION intake.outbox_notify();

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION intake.outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('intake_outbox', '');
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER outbox_notify AFTER INSERT ON intake.outbox
    FOR EACH STATEMENT EXECUTE FUNCTION intake.outbox_notify();
DROP INDEX intake.outbox_created_idx;
ALTER TABLE intake.outbox ADD COLUMN published_at timestamptz;
UPDATE intake.outbox o SET published_at = o.created_at
    WHERE NOT EXISTS (SELECT 1 FROM intake.outbox_pending p WHERE p.id = o.id);
CREATE INDEX outbox_pending_idx ON intake.outbox (seq) WHERE published_at IS NULL;
COMMENT ON COLUMN intake.outbox.attempts IS NULL;
DROP TABLE intake.outbox_pending;
