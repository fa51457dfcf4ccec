-- +goose Up
-- HTTP destinations (docs/destinations.md). dispatch_attempts is the
-- delivery log: one row per attempt to push an INTAKE_OUT message to a
-- destination — its webhook-id (msg_id: the message's Nats-Msg-Id, or the
-- original's for a redelivered copy), the event's key, the attempt number,
-- the answer (status code, error class, the first 1 KiB of the response
-- body), the latency and the outcome: delivered (2xx), retry (the next
-- attempt is scheduled at next_attempt_at) or failed (no retry left, or an
-- answer that no retry can mend). stream_seq is the INTAKE_OUT sequence, so
-- a failed delivery can be retried from the stream. Purged with the
-- delivery history (retention.history), by attempted_at.
CREATE TABLE intake.dispatch_attempts (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    destination     text        NOT NULL,
    msg_id          text        NOT NULL,
    key             text        NOT NULL,
    integration     text        NOT NULL,
    tenant          text        NOT NULL,
    event_type      text        NOT NULL,
    stream_seq      bigint      NOT NULL,
    attempt         int         NOT NULL,
    outcome         text        NOT NULL CHECK (outcome IN ('delivered', 'retry', 'failed')),
    status_code     int,                     -- NULL: no answer (timeout, refused, broken connection)
    error_class     text        NOT NULL,    -- '' when delivered
    latency_ms      int         NOT NULL,
    response        text        NOT NULL,    -- the first 1 KiB of the answer's body, valid UTF-8
    attempted_at    timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz              -- outcome retry only
);
CREATE INDEX dispatch_attempts_attempted_at_idx ON intake.dispatch_attempts (attempted_at);
CREATE INDEX dispatch_attempts_key_idx ON intake.dispatch_attempts (key, destination);
CREATE INDEX dispatch_attempts_msg_idx ON intake.dispatch_attempts (destination, msg_id);
CREATE INDEX dispatch_attempts_failed_idx ON intake.dispatch_attempts (destination, attempted_at) WHERE outcome = 'failed';

-- A destination's state as operators and the dispatchers see it: paused by
-- an operator (every dispatcher stops fetching for it until resumed), and
-- the circuit breaker's last word from a dispatcher (open until a probe
-- answers). One row per destination that has had either.
CREATE TABLE intake.destination_state (
    destination        text        PRIMARY KEY,
    paused             boolean     NOT NULL DEFAULT false,
    paused_by          text        NOT NULL DEFAULT '',
    paused_reason      text        NOT NULL DEFAULT '',
    paused_at          timestamptz,
    circuit_open       boolean     NOT NULL DEFAULT false,
    circuit_changed_at timestamptz,
    circuit_instance   text        NOT NULL DEFAULT ''
);

-- The audit of operators' actions on destinations: each pause and resume,
-- by whom and why (redeliveries to a destination are replays: their
-- audit is intake.replays). Kept as evidence (retention.evidence).
CREATE TABLE intake.destination_actions (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    destination text        NOT NULL,
    action      text        NOT NULL CHECK (action IN ('pause', 'resume')),
    requested_by text       NOT NULL,
    reason      text        NOT NULL,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX destination_actions_at_idx ON intake.destination_actions (at);
CREATE INDEX destination_actions_destination_idx ON intake.destination_actions (destination, id);

-- +goose Down
DROP TABLE intake.destination_actions;
DROP TABLE intake.destination_state;
DROP TABLE intake.dispatch_attempts;
