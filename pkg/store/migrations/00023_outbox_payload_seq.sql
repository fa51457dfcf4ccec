-- +goose Up
-- An outbox row may leave its payload in INTAKE_IN. The built-in Forward
-- handler's output is the event's body unchanged, which the stream already
-- holds at the sequence the processor consumed it from: the row then keeps
-- that sequence (payload_seq) and a NULL payload, and whoever publishes it
-- again — the relay after a processor died before its PubAcks, a
-- redelivery — reads the body back from the stream (stream.InPayload, which
-- checks it is that event's). The processor publishes its batch from
-- memory, so a payload copied into Postgres was written and never read:
-- half of Postgres's WAL per event at 1 KiB and most of its time at 16 KiB
-- (BENCHMARKS.md). A handler's own payload, and every row when INTAKE_IN
-- keeps messages for less than outbox.retention, is still copied.
-- Both changes are catalog-only (a nullable column without a default, a
-- dropped NOT NULL): nothing is rewritten or scanned.
SET LOCAL lock_timeout = '10s';
ALTER TABLE intake.outbox ADD COLUMN payload_seq bigint;
ALTER TABLE intake.outbox ALTER COLUMN payload DROP NOT NULL;
COMMENT ON COLUMN intake.outbox.payload_seq IS 'the payload is INTAKE_IN''s message at this sequence (payload NULL); NULL: the payload is in the row';

-- +goose Down
-- Rows whose payload is in the stream cannot get it back here: payload
-- stays nullable.
ALTER TABLE intake.outbox DROP COLUMN payload_seq;
