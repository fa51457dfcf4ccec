-- +goose Up
-- The replay guard keys on the signed bytes plus the topic (issue 36): a
-- body first accepted as one event type no longer refuses the same bytes
-- under another type (Shopify's orders/create and orders/updated can carry
-- identical bodies). A captured body under a fresh id and the same type is
-- refused as before.
--
-- The per-type records go to a table of their own, and body_hashes stays
-- exactly as 0.16 has it: a 0.16 processor still running during the roll
-- keeps writing it (its ON CONFLICT names body_hashes' primary key), and
-- nothing here builds an index over existing rows or locks what it writes.
-- A body_hashes row (recorded by 0.16, before or during the roll) guards
-- its body under every type (store.FirstKeys lets it win, and records no
-- type of that body here) until the purge removes it with the inbox keys
-- of its time. 0.17 processors write only body_type_hashes; a 0.16
-- processor does not read it, so while both run, a copy of a body first
-- seen by a 0.17 processor that reaches a 0.16 one is applied once more.
--
-- first_seen_at's index is the purge's walk, as body_hashes' (00012).
CREATE TABLE intake.body_type_hashes (
    integration    text        NOT NULL,
    payload_sha256 text        NOT NULL,
    event_type     text        NOT NULL,     -- '' for a message without a type
    account        text        NOT NULL,     -- the first key's
    event_id       text        NOT NULL,
    first_seen_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (integration, payload_sha256, event_type)
);
CREATE INDEX body_type_hashes_first_seen_idx ON intake.body_type_hashes (first_seen_at);

-- An operator may apply a delivery the guard refused, deliberately: a
-- replay with selector.keys and admit_replayed_bodies (replayer/request.go).
-- Its verified copies skip the guard; every other replay's, and every
-- re-drive's, do not. A constant default: no rewrite, a moment's lock.
SET LOCAL lock_timeout = '10s';
ALTER TABLE intake.replays ADD COLUMN admit_replayed_bodies boolean NOT NULL DEFAULT false;

-- +goose Down
-- 0.16 reads body_hashes only: the bodies first seen by 0.17 are forgotten,
-- and a copy of one is accepted once more.
SET LOCAL lock_timeout = '10s';
ALTER TABLE intake.replays DROP COLUMN admit_replayed_bodies;
DROP TABLE intake.body_type_hashes;
