-- +goose Up
-- What ingress refused (401 bad signature, 413 too large, 429 rate limited,
-- 503 busy or the stream away, 400 malformed), counted per ingress instance,
-- integration, status code and reason over windows of about 10 s
-- (envelope.RefusalSummary), folded by the processors' receipt folder: the
-- overview's and `intake status`'s refusals by reason. A refused request
-- never reserves an event id and never enters the inbox; this is a count
-- only, no key, no body. Each summary's rows are written once (summary_id).
-- Purged with the delivery history (retention.history), by window_end.
CREATE TABLE intake.ingress_refusals (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    summary_id   text        NOT NULL,
    integration  text        NOT NULL,
    instance     text        NOT NULL,
    window_start timestamptz NOT NULL,
    window_end   timestamptz NOT NULL,
    status_code  int         NOT NULL,
    reason       text        NOT NULL,
    refusals     bigint      NOT NULL,
    UNIQUE (summary_id, status_code, reason)
);
CREATE INDEX ingress_refusals_window_end_idx ON intake.ingress_refusals (window_end);

-- +goose Down
DROP TABLE intake.ingress_refusals;
