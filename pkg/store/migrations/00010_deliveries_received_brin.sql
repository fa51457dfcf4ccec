-- +goose Up
-- The gap check (replayer/gaps.go) looks for delivery receipts of a recent
-- window — a "duplicate" answer proves the stream held the event's message —
-- whose event has no inbox row. A BRIN index on received_at keeps that a
-- range read: receipts arrive in time order, and a BRIN index costs next to
-- nothing to maintain on the delivery history's inserts. Not CONCURRENTLY:
-- that waits for every other session's snapshot, which concurrent
-- `intake migrate` runs waiting for the migration lock hold. A BRIN build
-- is one sequential read of the table; inserts into it wait that long.
SET LOCAL lock_timeout = '10s';
CREATE INDEX deliveries_received_brin ON intake.deliveries USING brin (received_at);

-- +goose Down
DROP INDEX intake.deliveries_received_brin;
