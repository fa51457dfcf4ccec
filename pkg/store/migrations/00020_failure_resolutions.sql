-- +goose Up
-- Failed and quarantined events as work items: the API and the console
-- group them by integration, status, error class and error signature (the
-- error text with numbers and ids masked), and an operator resolves a
-- group with a note. Each resolution is appended, never updated: the audit
-- of who said what about a failure outlives the failure's rows. A group
-- counts as resolved while no event of it failed after its latest
-- resolution. Purged with the evidence (retention.evidence), by resolved_at.
CREATE TABLE intake.failure_resolutions (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    integration text        NOT NULL,
    status      text        NOT NULL,
    error_class text        NOT NULL,
    signature   text        NOT NULL,
    resolved_by text        NOT NULL,
    resolved_at timestamptz NOT NULL DEFAULT now(),
    note        text        NOT NULL,
    events      bigint      NOT NULL  -- the group's size when resolved
);
CREATE INDEX failure_resolutions_group_idx ON intake.failure_resolutions (integration, status, error_class, signature, resolved_at);
CREATE INDEX failure_resolutions_resolved_at_idx ON intake.failure_resolutions (resolved_at);

-- +goose Down
DROP TABLE intake.failure_resolutions;
