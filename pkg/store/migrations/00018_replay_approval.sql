-- +goose Up
-- A re-execution runs handlers again for every event it selects. Above
-- api.replays.reexecute_approval_above events it waits, recorded but not
-- published, for a second operator's approval (POST
-- /api/v1/replays/{id}/approve): one operator token alone cannot re-run a
-- million handlers. The approver is recorded beside the requester.
ALTER TABLE intake.replays DROP CONSTRAINT replays_state_check;
ALTER TABLE intake.replays ADD CONSTRAINT replays_state_check
    CHECK (state IN ('awaiting_approval', 'running', 'done', 'failed', 'cancelled'));
ALTER TABLE intake.replays
    ADD COLUMN approved_by text,
    ADD COLUMN approved_at timestamptz;

-- +goose Down
UPDATE intake.replays SET state = 'cancelled', cancelled_by = 'migration 00018 down', finished_at = now()
    WHERE state = 'awaiting_approval';
ALTER TABLE intake.replays
    DROP COLUMN approved_by,
    DROP COLUMN approved_at;
ALTER TABLE intake.replays DROP CONSTRAINT replays_state_check;
ALTER TABLE intake.replays ADD CONSTRAINT replays_state_check
    CHECK (state IN ('running', 'done', 'failed', 'cancelled'));
