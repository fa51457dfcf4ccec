-- +goose Up
-- The replay guard (integrations[].replay_guard). Where the signature covers
-- the body but not the event id (GitHub, Shopify, hmac with a header id), a
-- captured body sent again under a fresh id would be a new event. The first
-- key that brought a body into an integration is kept here; a message of a
-- guarded integration whose body is here under another key is refused before
-- its claim and recorded in rejected_messages (reason replayed_body), with the
-- key it copies. Only guarded integrations write here: the inbox claim of the
-- others pays nothing.
CREATE TABLE intake.body_hashes (
    integration    text        NOT NULL,
    payload_sha256 text        NOT NULL,
    account        text        NOT NULL,     -- the first key's
    event_id       text        NOT NULL,
    first_seen_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (integration, payload_sha256)
);

-- A replayed body's record names the event whose body it carries, so that
-- event's detail lists its copies.
ALTER TABLE intake.rejected_messages
    ADD COLUMN original_account  text,
    ADD COLUMN original_event_id text;
CREATE INDEX rejected_messages_original_idx ON intake.rejected_messages (integration, original_account, original_event_id)
    WHERE original_event_id IS NOT NULL;

-- +goose Down
DROP INDEX intake.rejected_messages_original_idx;
ALTER TABLE intake.rejected_messages
    DROP COLUMN original_account,
    DROP COLUMN original_event_id;
DROP TABLE intake.body_hashes;
