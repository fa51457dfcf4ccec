-- +goose Up
-- The Nats-Msg-Id of an outbox message, apart from the row's id. The id
-- stays a time-ordered UUIDv7 (the primary key's index appends; the relay
-- claims in id order); msg_id is derived from the event's key and the
-- output's position in its execution (store.OutboxMsgID), so an event run
-- again after a failover lost its commit publishes under the same ids and
-- INTAKE_OUT's duplicate window drops the repeat. Nullable without a
-- default, so adding it rewrites nothing: rows written before it publish
-- under their id, as they always did.
-- The brief exclusive lock must not queue behind a long reader of the
-- outbox and stall every processor's insert meanwhile: fail instead, and
-- let `intake migrate` be run again.
SET LOCAL lock_timeout = '10s';
ALTER TABLE intake.outbox ADD COLUMN msg_id text;
COMMENT ON COLUMN intake.outbox.msg_id IS 'Nats-Msg-Id on INTAKE_OUT; NULL: the id';

-- +goose Down
ALTER TABLE intake.outbox DROP COLUMN msg_id;
