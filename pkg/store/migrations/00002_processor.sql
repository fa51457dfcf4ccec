-- +goose Up
-- Ordering: the object an event changes and its version (provider-defined:
-- a counter, or a timestamp as unix microseconds). object_versions guards the
-- change so an older event arriving late is recorded as stale, not applied.
ALTER TABLE intake.inbox ADD COLUMN object_id text, ADD COLUMN object_version bigint;

CREATE TABLE intake.object_versions (
    integration text        NOT NULL,
    account     text        NOT NULL,
    object_id   text        NOT NULL,
    version     bigint      NOT NULL,
    event_id    text        NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (integration, account, object_id)
);

-- Every run of a handler for an event: the original one, a retry of a failed
-- event, or an explicit re-execution by the replayer (linked by replay_id).
-- Handlers see the execution id and derive idempotency keys for side
-- effects outside the database from it (or from the scoped key).
CREATE TABLE intake.executions (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    integration text        NOT NULL,
    account     text        NOT NULL,
    event_id    text        NOT NULL,
    mode        text        NOT NULL CHECK (mode IN ('original', 'retry', 'reexecute')),
    replay_id   text,
    stream_seq  bigint      NOT NULL,
    executed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX executions_key_idx ON intake.executions (integration, account, event_id);

-- Delivery history: one row per verified delivery ingress answered, also
-- those the stream window stopped, folded in from receipts. receipt_id makes
-- the fold idempotent.
CREATE TABLE intake.deliveries (
    receipt_id  text        PRIMARY KEY,
    integration text        NOT NULL,
    account     text        NOT NULL,
    event_id    text        NOT NULL,
    received_at timestamptz NOT NULL,
    instance    text        NOT NULL,
    status_code integer     NOT NULL,
    answer      text        NOT NULL,
    retry_hints jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX deliveries_key_idx ON intake.deliveries (integration, account, event_id, received_at);

-- +goose Down
DROP TABLE intake.deliveries;
DROP TABLE intake.executions;
DROP TABLE intake.object_versions;
ALTER TABLE intake.inbox DROP COLUMN object_id, DROP COLUMN object_version;
