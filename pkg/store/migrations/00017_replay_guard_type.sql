-- +goose Up
-- The replay guard keys on the signed bytes plus the topic (issue 36): a
-- body first accepted as one event type no longer refuses the same bytes
-- under another type (Shopify's orders/create and orders/updated can carry
-- identical bodies). A captured body under a fresh id and the same type is
-- refused as before.
--
-- The column has a constant default: added without rewriting the table.
-- Rows recorded before this migration keep event_type '' and go on guarding
-- every type (store.FirstKeys lets a '' row win) until the purge removes
-- them with the inbox keys of their time. The new primary key is one index
-- build of body_hashes (one row per guarded event within the inbox
-- retention), under this ALTER's lock: guarded inserts wait that long,
-- nothing else does. A processor of the release before names the old key
-- in its ON CONFLICT and fails on it: the changelog says stop the
-- processors for this migration.
SET LOCAL lock_timeout = '10s';
ALTER TABLE intake.body_hashes
    ADD COLUMN event_type text NOT NULL DEFAULT '',
    DROP CONSTRAINT body_hashes_pkey,
    ADD PRIMARY KEY (integration, payload_sha256, event_type);

-- An operator may apply a delivery the guard refused, deliberately: a
-- replay with selector.keys and admit_replayed_bodies (replayer/request.go).
-- Its verified copies skip the guard; every other replay's, and every
-- re-drive's, do not.
ALTER TABLE intake.replays ADD COLUMN admit_replayed_bodies boolean NOT NULL DEFAULT false;

-- +goose Down
SET LOCAL lock_timeout = '10s';
ALTER TABLE intake.replays DROP COLUMN admit_replayed_bodies;
-- One row per body again: the earliest keeps it.
DELETE FROM intake.body_hashes h
USING intake.body_hashes e
WHERE e.integration = h.integration AND e.payload_sha256 = h.payload_sha256
  AND (e.first_seen_at, e.event_type) < (h.first_seen_at, h.event_type);
ALTER TABLE intake.body_hashes DROP CONSTRAINT body_hashes_pkey;
ALTER TABLE intake.body_hashes DROP COLUMN event_type;
ALTER TABLE intake.body_hashes ADD PRIMARY KEY (integration, payload_sha256);
