-- +goose Up
-- The inbox is the authoritative, long-lived dedup record: one row per logical
-- provider event, keyed by the scoped key. The claim of this row and the
-- business change commit in one transaction.
CREATE TABLE intake.inbox (
    integration       text        NOT NULL,
    account           text        NOT NULL,
    event_id          text        NOT NULL,
    tenant            text        NOT NULL,
    event_type        text        NOT NULL,
    payload_sha256    text        NOT NULL,
    status            text        NOT NULL CHECK (status IN ('processed', 'stale', 'failed', 'quarantined')),
    delivery_count    integer     NOT NULL DEFAULT 1,
    attempts          integer     NOT NULL DEFAULT 1,
    first_received_at timestamptz NOT NULL,
    last_received_at  timestamptz NOT NULL,
    processed_at      timestamptz,
    stream_seq        bigint      NOT NULL,
    error             text,
    PRIMARY KEY (integration, account, event_id)
);
CREATE INDEX inbox_status_idx ON intake.inbox (status, last_received_at);
CREATE INDEX inbox_stream_seq_idx ON intake.inbox (stream_seq);
CREATE INDEX inbox_received_idx ON intake.inbox (first_received_at);

-- A conflict is a delivery with a known scoped key but another payload. The
-- original row is never touched; the conflicting message stays in INTAKE_IN.
CREATE TABLE intake.conflicts (
    id                     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    integration            text        NOT NULL,
    account                text        NOT NULL,
    event_id               text        NOT NULL,
    tenant                 text        NOT NULL,
    original_sha256        text        NOT NULL,
    conflicting_sha256     text        NOT NULL,
    original_stream_seq    bigint      NOT NULL,
    conflicting_stream_seq bigint      NOT NULL,
    received_at            timestamptz NOT NULL,
    detected_at            timestamptz NOT NULL DEFAULT now(),
    -- a redelivery of the same conflicting message records nothing new
    UNIQUE (integration, account, event_id, conflicting_stream_seq)
);
CREATE INDEX conflicts_key_idx ON intake.conflicts (integration, account, event_id);
CREATE INDEX conflicts_detected_idx ON intake.conflicts (detected_at);

-- The outbox removes the dual write between Postgres and NATS: handlers write
-- rows in the inbox transaction, the relay publishes them to INTAKE_OUT with
-- Nats-Msg-Id = id, so a republish after a crash is deduplicated.
CREATE TABLE intake.outbox (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    seq          bigint      GENERATED ALWAYS AS IDENTITY,
    integration  text        NOT NULL,
    account      text        NOT NULL,
    event_id     text        NOT NULL,
    subject      text        NOT NULL,
    headers      jsonb       NOT NULL DEFAULT '{}',
    payload      bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz,
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text
);
CREATE INDEX outbox_pending_idx ON intake.outbox (seq) WHERE published_at IS NULL;
CREATE INDEX outbox_key_idx ON intake.outbox (integration, account, event_id);

-- Wake the relay when rows commit (NOTIFY is delivered at commit).
-- +goose StatementBegin
CREATE FUNCTION intake.outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('intake_outbox', '');
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER outbox_notify AFTER INSERT ON intake.outbox
    FOR EACH STATEMENT EXECUTE FUNCTION intake.outbox_notify();

-- +goose Down
DROP TABLE intake.outbox;
DROP FUNCTION intake.outbox_notify();
DROP TABLE intake.conflicts;
DROP TABLE intake.inbox;
