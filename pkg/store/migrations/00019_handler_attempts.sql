-- +goose Up
-- Every failed handler run of an event, one row per delivery: what went
-- wrong, when, and when the processor tries again. An event whose handler
-- fails is retried with backoff and gets its inbox row only after its last
-- attempt (the inbox holds decisions); until then these rows are how the
-- API, the CLI and the console show it as retrying: attempt n of
-- max_deliver, the next attempt's time, each attempt's error. They stay as
-- the event's history once it is processed or recorded failed, and go with
-- the evidence retention (retention.evidence), by failed_at.
CREATE TABLE intake.handler_attempts (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    integration     text        NOT NULL,
    account         text        NOT NULL,
    event_id        text        NOT NULL,
    tenant          text        NOT NULL,
    event_type      text        NOT NULL,
    payload_sha256  text        NOT NULL,
    stream_seq      bigint      NOT NULL,
    delivery        int         NOT NULL,
    max_deliver     int         NOT NULL,
    handler         text        NOT NULL DEFAULT '',
    error_class     text        NOT NULL,
    error           text        NOT NULL,
    received_at     timestamptz NOT NULL,
    failed_at       timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz,             -- NULL: the last attempt (recorded failed or quarantined)
    UNIQUE (integration, account, event_id, stream_seq, delivery)
);
CREATE INDEX handler_attempts_failed_at_idx ON intake.handler_attempts (failed_at);

-- +goose Down
DROP TABLE intake.handler_attempts;
