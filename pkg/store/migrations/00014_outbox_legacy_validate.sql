-- +goose Up
-- Reads every outbox row once to prove the bound 00013 set. VALIDATE takes
-- a SHARE UPDATE EXCLUSIVE lock: processors go on inserting while it reads.
ALTER TABLE intake.outbox VALIDATE CONSTRAINT outbox_legacy_until;

-- +goose Down
SELECT 1; -- a validated constraint needs no undoing: 00013's Down drops it
