-- +goose Up
-- The operator console's sessions (replayer/console, docs/console.md). A
-- session is a random 256-bit id in the browser's cookie; this table holds
-- only the id's SHA-256, so a reader of the database (a backup, a replica)
-- cannot present one. Every replayer on the database reads the same rows:
-- a session signed in on one pod is good on the others, and a sign-out on
-- one ends it on all.
--
-- token_id names the api.tokens entry the session signed in with (a
-- SHA-256 of the token's SHA-256): a replayer whose config no longer has
-- that token refuses the session. token_name and role are as they were at
-- sign-in, for whoever reads the table; the replayer takes both from its
-- config. csrf is the session's own random CSRF token, which every
-- console POST must carry.
--
-- A session is good while expires_at is ahead and created_at is within the
-- console's TTL (8 h): each replayer checks both, so a row whose expiry was
-- moved, or a TTL shortened since, cannot outlive the TTL. Expired rows are
-- deleted at each sign-in (the index finds them).
CREATE TABLE intake.console_sessions (
    id_sha256  bytea       PRIMARY KEY CHECK (octet_length(id_sha256) = 32),
    token_id   text        NOT NULL,
    token_name text        NOT NULL,
    role       text        NOT NULL,
    csrf       text        NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    CHECK (expires_at > created_at)
);
CREATE INDEX console_sessions_expires_idx ON intake.console_sessions (expires_at);

-- +goose Down
DROP TABLE intake.console_sessions;
