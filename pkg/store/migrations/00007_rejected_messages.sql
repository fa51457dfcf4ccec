-- +goose Up
-- INTAKE_IN messages the processor refused before the inbox decision: an
-- envelope that contradicts the configuration (unknown integration, another
-- tenant, a subject of another integration) or a replay copy that no
-- recorded replay covers. Nothing of them was applied; the row says why,
-- and the message stays in INTAKE_IN (terminated) for inspection.
CREATE TABLE intake.rejected_messages (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    integration    text        NOT NULL,     -- as the message claims (Intake-Key)
    account        text        NOT NULL,
    event_id       text        NOT NULL,
    tenant         text        NOT NULL,     -- as the message claims (Intake-Tenant)
    event_type     text        NOT NULL,
    payload_sha256 text        NOT NULL,
    stream_seq     bigint      NOT NULL,     -- INTAKE_IN
    subject        text        NOT NULL,
    msg_id         text        NOT NULL DEFAULT '',
    replay_id      text,                     -- Intake-Replay-Id, as sent (may name no replay)
    replay_mode    text,
    reason         text        NOT NULL,     -- unknown_integration, tenant_mismatch, ...
    detail         text        NOT NULL DEFAULT '',
    received_at    timestamptz,              -- Intake-Received-At (or the stream's timestamp)
    rejected_at    timestamptz NOT NULL DEFAULT now(),
    -- A redelivery of a message whose batch committed but whose Term was
    -- lost is recorded once.
    UNIQUE (stream_seq, integration, account, event_id)
);
CREATE INDEX rejected_messages_rejected_idx ON intake.rejected_messages (rejected_at);
CREATE INDEX rejected_messages_key_idx ON intake.rejected_messages (integration, account, event_id);

-- +goose Down
DROP TABLE intake.rejected_messages;
