-- +goose Up
-- Every replay and redelivery an operator asks for, dry runs too: the audit
-- record (who, when, what, why) and the progress of the ones that publish.
CREATE TABLE intake.replays (
    id              uuid        PRIMARY KEY,
    requested_by    text        NOT NULL,                 -- API token name
    created_at      timestamptz NOT NULL DEFAULT now(),
    selector        jsonb       NOT NULL,
    mode            text        NOT NULL CHECK (mode IN ('exact', 'reexecute', 'redeliver')),
    reason          text        NOT NULL DEFAULT '',
    dry_run         boolean     NOT NULL,
    rate            integer     NOT NULL,                 -- events per second
    state           text        NOT NULL CHECK (state IN ('running', 'done', 'failed', 'cancelled')),
    matched         bigint      NOT NULL DEFAULT 0,
    published       bigint      NOT NULL DEFAULT 0,
    -- PubAcks the stream answered "duplicate": a republish after a crash
    -- that the resume scan could not see (should stay 0).
    duplicates      bigint      NOT NULL DEFAULT 0,
    outcomes        jsonb       NOT NULL DEFAULT '{}',    -- predicted outcome -> count
    counts          jsonb       NOT NULL DEFAULT '[]',    -- by tenant, integration, type, outcome
    sample          jsonb       NOT NULL DEFAULT '[]',    -- a few selected keys
    -- Last sequence of the target stream known to precede every unconfirmed
    -- publish of this replay: a resuming replayer scans the stream after it
    -- for copies that were acked but not yet marked, so it never publishes
    -- them twice, even past the duplicate window.
    resume_from_seq bigint      NOT NULL DEFAULT 0,
    cancelled_by    text,
    error           text,
    finished_at     timestamptz
);
CREATE INDEX replays_created_idx ON intake.replays (created_at);
CREATE INDEX replays_running_idx ON intake.replays (created_at) WHERE state = 'running';

-- What a publishing replay republishes, resolved from its selector when it
-- was created, in order; state moves pending -> published (or missing when
-- the source message is gone) as PubAcks arrive.
CREATE TABLE intake.replay_items (
    replay_id     uuid        NOT NULL REFERENCES intake.replays (id) ON DELETE CASCADE,
    pos           integer     NOT NULL,
    integration   text        NOT NULL,
    account       text        NOT NULL,
    event_id      text        NOT NULL,
    tenant        text        NOT NULL,
    event_type    text        NOT NULL,
    stream_seq    bigint,                 -- source: INTAKE_IN (replays) or INTAKE_OUT (redeliveries)
    outbox_id     uuid,                   -- source of an outbox redelivery
    msg_id        text        NOT NULL,   -- Nats-Msg-Id of the copy
    outcome       text        NOT NULL,   -- predicted: would_apply, would_deduplicate, ...
    state         text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'published', 'missing')),
    published_seq bigint,                 -- where the copy landed
    published_at  timestamptz,
    PRIMARY KEY (replay_id, pos),
    UNIQUE (replay_id, msg_id)
);
CREATE INDEX replay_items_pending_idx ON intake.replay_items (replay_id, pos) WHERE state = 'pending';
CREATE INDEX replay_items_key_idx ON intake.replay_items (integration, account, event_id);

-- +goose Down
DROP TABLE intake.replay_items;
DROP TABLE intake.replays;
